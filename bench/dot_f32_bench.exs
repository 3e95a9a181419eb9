# f32 Nx.dot from Elixir through NxVulkan.Compiler: `precision: :fast` (DotPrecision::TensorCore:
# split-f32 on f16 tensor cores for products of 2048³ and more where the device has cooperative
# matrices, the SGEMM below that) and `:exact` (f64 accumulation, Nx.BinaryBackend's bits).
# JSON lines: throughput (20 calls queued, then synchronize, per call) and TFLOP/s; the error of
# :fast against :exact (max |diff| / max |exact|). Peer: bench/torch_gemm.py --types f32.
# Needs Nx (ERL_LIBS). SIZES (default 1024,2048,4096), REPS (default 5). Each case is warmed for
# 0.3 s before it is timed.
Application.ensure_all_started(:nx)
Nx.default_backend(NxVulkan.Backend)
sizes = System.get_env("SIZES", "1024,2048,4096") |> String.split(",") |> Enum.map(&String.to_integer/1)
reps = String.to_integer(System.get_env("REPS", "5"))

median = fn xs -> xs |> Enum.sort() |> Enum.at(div(length(xs), 2)) end

for n <- sizes do
  key = Nx.Random.key(n)
  {a, key} = Nx.Random.normal(key, shape: {n, n}, type: :f32)
  {b, _} = Nx.Random.normal(key, shape: {n, n}, type: :f32)
  a = Nx.backend_transfer(a, NxVulkan.Backend)
  b = Nx.backend_transfer(b, NxVulkan.Backend)

  results =
    for precision <- [:fast, :exact] do
      jit = Nx.Defn.jit(&Nx.dot/2, compiler: NxVulkan.Compiler, precision: precision)
      c = jit.(a, b)
      NxVulkan.synchronize()
      calls = if precision == :exact and n >= 4096, do: 2, else: 20
      # at least 0.3 s of calls first: the GPU leaves its idle clocks (as the other benches)
      t0 = System.monotonic_time(:millisecond)

      Stream.repeatedly(fn -> jit.(a, b); NxVulkan.synchronize() end)
      |> Enum.find(fn _ -> System.monotonic_time(:millisecond) - t0 > 300 end)

      us =
        median.(
          for _ <- 1..reps do
            {t, _} = :timer.tc(fn -> for(_ <- 1..calls, do: jit.(a, b)); NxVulkan.synchronize() end)
            t / calls
          end
        )

      IO.puts(
        ~s({"bench":"dot_f32_elixir","n":#{n},"precision":"#{precision}","per_call_us":#{Float.round(us, 1)},"tflops":#{Float.round(2 * n * n * n / us / 1.0e6, 2)}})
      )

      {precision, c}
    end

  fast = Nx.backend_transfer(results[:fast], Nx.BinaryBackend)
  exact = Nx.backend_transfer(results[:exact], Nx.BinaryBackend)
  err = Nx.subtract(fast, exact) |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()
  scale = exact |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()
  IO.puts(~s({"bench":"dot_f32_elixir_error","n":#{n},"fast_vs_exact_max_abs_over_max":#{err / scale}}))
end
