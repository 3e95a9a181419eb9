nx? = Code.ensure_loaded?(Nx)
# Nx reads its default backend from its application env, so the app must be started.
if nx?, do: {:ok, _} = Application.ensure_all_started(:nx)
ExUnit.configure(exclude: if(nx?, do: [], else: [:nx]))
ExUnit.start()
