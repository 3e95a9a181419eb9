nx? = Code.ensure_loaded?(Nx)
ExUnit.configure(exclude: if(nx?, do: [], else: [:nx]))
ExUnit.start()
