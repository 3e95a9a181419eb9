defmodule Mix.Tasks.NxVulkan.Info do
  @shortdoc "Prints the Vulkan devices and their capabilities (as `nx-vulkan info` does)"
  @moduledoc @shortdoc
  use Mix.Task

  @impl true
  def run(_args) do
    Mix.Task.run("compile")
    Mix.shell().info(NxVulkan.info_report())
  end
end
