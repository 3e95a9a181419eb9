nx? = Code.ensure_loaded?(Nx)
# Nx reads its default backend from its application env, so the app must be started.
if nx?, do: {:ok, _} = Application.ensure_all_started(:nx)
# :nx_strict (Nx's doctests with the host fallback forbidden) is a measurement, run on demand.
ExUnit.configure(exclude: if(nx?, do: [:nx_strict], else: [:nx, :nx_strict]))
ExUnit.start()
