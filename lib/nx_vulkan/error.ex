defmodule NxVulkan.Error do
  @moduledoc "A device, memory or internal failure reported by the engine."
  defexception [:kind, :message]
end
