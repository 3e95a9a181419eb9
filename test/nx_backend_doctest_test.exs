# Compiled only where Nx is loadable (CI has none; the :nx tag is excluded there).
if Code.ensure_loaded?(Nx) do
  defmodule NxVulkan.BackendDoctestTest do
    @moduledoc """
    Nx's own doctests against NxVulkan.Backend, the way EXLA and Torchx check themselves.

    Exclusions, each with its reason (nothing is excluded for float rounding: the engine's
    numerics follow Nx.BinaryBackend bit for bit):

      * `default_backend/1`, `global_default_backend/1` — they print the process's default
        backend, which this module sets to NxVulkan.Backend.
      * `Nx.LinAlg.eigh/2`, `least_squares/3`, `pinv/2` — fail on plain Nx.BinaryBackend's own
        tensors too when the default backend is not BinaryBackend (per ../shared/NX.md: a pure
        delegating backend fails exactly these six); results are valid but print differently.
      * `Nx.erf_inv/1` — Nx.BinaryBackend evaluates Giles' single-precision approximation, so
        its f32 `erf_inv(0.9)` prints 1.163087010383606; ours is 1.1630871295928955, the
        correctly rounded f32 of erfinv(0.9) = 1.16308715367667… (checked against MPFR in
        native/engine/tests/math_ulp.rs). A more accurate result, not a rounding exclusion.
    """
    use ExUnit.Case, async: false

    @moduletag :nx
    @moduletag timeout: 1_200_000

    setup do
      Nx.default_backend(NxVulkan.Backend)
      :ok
    end

    @backend_printing [default_backend: 1, global_default_backend: 1, erf_inv: 1]
    @valid_differences [eigh: 2, least_squares: 2, pinv: 2]

    doctest Nx, except: @backend_printing
    doctest Nx.LinAlg, except: @valid_differences
  end

  defmodule NxVulkan.BackendStrictDoctestTest do
    @moduledoc """
    The same doctests in strict mode: any host fallback raises, so every failure here is a
    doctest that needs an op the engine cannot run yet. Excluded by default (it is a
    measurement, not a gate); run it with

        ERL_LIBS=... mix test test/nx_backend_doctest_test.exs --only nx_strict

    On Nx 0.7.2: 1009 of 1039 pass (97.1 %; `erf_inv` excluded as in the normal run). The 30
    failures: `reduce` 11, `window_reduce` 5 and `map` 5 (Elixir functions), `eigh` 8 (svd,
    norm, matrix_rank call it), complex `conv` 1.
    """
    use ExUnit.Case, async: false

    @moduletag :nx
    @moduletag :nx_strict
    @moduletag timeout: 1_200_000

    setup do
      Nx.default_backend(NxVulkan.Backend)
      NxVulkan.strict(true)
      on_exit(fn -> NxVulkan.strict(nil) end)
      :ok
    end

    doctest Nx, except: [default_backend: 1, global_default_backend: 1, erf_inv: 1]
    doctest Nx.LinAlg, except: [eigh: 2, least_squares: 2, pinv: 2]
  end
end
