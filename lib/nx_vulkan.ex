defmodule NxVulkan do
  @moduledoc """
  GPU compute for Elixir on Vulkan.

  This module is the small tensor-handle API the Nx backend builds on: put bytes on the
  device, run native ops, read bytes back. Handles are opaque references; the device memory
  behind one is returned to the engine's pool when the handle is garbage-collected or
  `deallocate/1`d.

      iex> a = NxVulkan.upload(<<1.0::float-32-little, 2.0::float-32-little>>, {:f, 32}, {2})
      iex> b = NxVulkan.binary(:add, a, a, {:f, 32})
      iex> NxVulkan.download(b)
      <<2.0::float-32-little, 4.0::float-32-little>>

  The device is chosen explicitly: `NX_VULKAN_DEVICE` (an index or part of a name) or
  `open/1` before first use. A device that is absent is an error, never a silent switch.
  Bad arguments raise `ArgumentError`; device, memory and internal failures raise
  `NxVulkan.Error`.
  """

  alias NxVulkan.Native

  @typedoc "An Nx type tuple such as `{:f, 32}`, `{:bf, 16}` or `{:c, 64}`."
  @type type :: {:f | :bf | :s | :u | :c, pos_integer}
  @type handle :: reference

  @doc "Every Vulkan device the loader reports, with its capabilities."
  def devices, do: unwrap!(Native.devices())

  @doc """
  Opens the device to use in this VM: `nil` for `NX_VULKAN_DEVICE` or the default, an index,
  or part of a device name. Must come before any tensor work if it names a different device.
  """
  def open(selector \\ nil) do
    selector = if selector == nil, do: "", else: to_string(selector)
    unwrap!(Native.open(selector))
  end

  @doc "Capabilities of the device in use (opening the default device if none is open)."
  def device_info, do: unwrap!(Native.device_info())

  @doc "The same report as `nx-vulkan info`."
  def info_report, do: unwrap!(Native.info_report())

  @doc """
  Engine counters: dispatches and recordings (one per op) queued, dispatches recorded without
  a barrier in front (`:concurrent_dispatches`: independent steps of a compiled function that
  may overlap on the device), submissions made and in flight, pipelines built, buffer pool
  state. Tests use these to see where work ran.
  """
  def stats, do: unwrap!(Native.stats())

  @doc """
  Waits until every op queued so far has run on the device.

  Ops are queued, not waited for: an op returns its output handle at once and the device runs
  the work in call order (across processes too). `download/1` (and so `Nx.to_binary/1`,
  `inspect`, ...) waits for what it reads. An error in queued work (a lost device, a failed
  submission) raises `NxVulkan.Error` at the next such synchronisation point, naming the
  kernels of the failed submission.
  """
  def synchronize do
    # Short waits spin on this (normal) scheduler; longer ones move to a dirty scheduler.
    nowait_or(Native.synchronize_nowait(), &Native.synchronize/0)
  end

  @doc """
  `true` makes every op wait for its own completion (as `NX_VULKAN_SYNC=1` does), so an error
  in device work raises at the op that caused it; `false` queues again. Results are the same
  bits either way. Returns the previous setting.
  """
  def synchronous(on) when is_boolean(on), do: unwrap!(Native.set_synchronous(on))

  @doc """
  Runs `fun` with every kernel on the device timed (timestamp queries) and returns
  `{result, report}`. The report: `:kernels`, one map per kernel (`:name`, its key — what it
  computes over which types and layouts — `:runs`, `:device_us`, `:bytes` for copies), longest
  device time first; `:device_us`, their sum; `:host_us`, the wall time of `fun` plus waiting
  for its work; `:bytes`, bytes copied. Also emitted as `[:nx_vulkan, :profile]` telemetry
  when `:telemetry` is loaded.

      {_, report} = NxVulkan.profile(fn -> NxVulkan.download(NxVulkan.unary(:exp, x, {:f, 32})) end)
  """
  def profile(fun) when is_function(fun, 0) do
    unwrap!(Native.profile_start())
    t0 = System.monotonic_time(:microsecond)

    result =
      try do
        fun.()
      catch
        kind, reason ->
          # A raise in fun must not leave the device profiling.
          Native.profile_stop()
          :erlang.raise(kind, reason, __STACKTRACE__)
      end

    stopped = unwrap!(Native.profile_stop())
    host_us = System.monotonic_time(:microsecond) - t0

    kernels =
      for {name, runs, ns, bytes} <- stopped,
          do: %{name: name, runs: runs, device_us: ns / 1000, bytes: bytes}

    report = %{
      kernels: kernels,
      device_us: kernels |> Enum.map(& &1.device_us) |> Enum.sum(),
      host_us: host_us,
      bytes: kernels |> Enum.map(& &1.bytes) |> Enum.sum()
    }

    if Code.ensure_loaded?(:telemetry) do
      apply(:telemetry, :execute, [[:nx_vulkan, :profile], %{device_us: report.device_us, host_us: host_us}, report])
    end

    {result, report}
  end

  @doc false
  # Tests only: the next submission fails as a failed vkQueueSubmit would.
  def inject_failure(message), do: unwrap!(Native.inject_failure(message))

  @doc "Frees the buffers the pool keeps for reuse."
  def trim_pool, do: unwrap!(Native.trim_pool())

  @doc "Copies a row-major little-endian binary to a new device tensor."
  def upload(data, type, shape) when is_binary(data) and is_tuple(shape) do
    {type, shape} = {type_name(type), Tuple.to_list(shape)}

    # A small binary is copied on this (normal) scheduler unless that would wait.
    nowait_or(Native.upload_nowait(data, type, shape), fn -> Native.upload(data, type, shape) end)
  end

  @doc "Reads a device tensor back as a binary (waits for the ops that produce it)."
  def download(handle) do
    # A small result is read on this (normal) scheduler when the device finishes it within
    # the engine's spin; otherwise the wait moves to a dirty scheduler.
    case Native.download_nowait(handle) do
      {:pending, read} -> unwrap!(Native.download_finish(read))
      result -> nowait_or(result, fn -> Native.download(handle) end)
    end
  end

  @doc "`{type, shape}` of a handle."
  def describe(handle) do
    {type, shape} = unwrap!(Native.describe(handle))
    {parse_type(type), List.to_tuple(shape)}
  end

  @doc "Frees the device memory now. Returns `:ok`, or `:already_deallocated`."
  def deallocate(handle), do: Native.deallocate(handle)

  @doc """
  An elementwise unary op (`:exp`, `:negate`, ...) with result type `out`, its float math as
  `precision/1` says.
  """
  def unary(op, handle, out) do
    {op, out, fast} = {Atom.to_string(op), type_name(out), fast?()}

    # A warm op is queued from this scheduler; one that would compile or wait goes dirty.
    nowait_or(Native.unary_nowait(op, handle, out, fast), fn ->
      Native.unary(op, handle, out, fast)
    end)
  end

  @doc "An elementwise binary op with broadcasting and result type `out` (see `unary/3`)."
  def binary(op, a, b, out) do
    {op, out, fast} = {Atom.to_string(op), type_name(out), fast?()}

    nowait_or(Native.binary_nowait(op, a, b, out, fast), fn ->
      Native.binary(op, a, b, out, fast)
    end)
  end

  defp fast?, do: NxVulkan.Precision.current() == :fast

  def as_type(handle, out), do: unwrap!(Native.convert(handle, type_name(out)))
  def bitcast(handle, out), do: unwrap!(Native.bitcast(handle, type_name(out)))

  def select(pred, on_true, on_false, out),
    do: unwrap!(Native.select(pred, on_true, on_false, type_name(out)))

  def clip(x, lo, hi, out), do: unwrap!(Native.clip(x, lo, hi, type_name(out)))

  def iota(type, shape, axis \\ nil),
    do: unwrap!(Native.iota(type_name(type), Tuple.to_list(shape), axis))

  def reshape(handle, shape), do: unwrap!(Native.reshape(handle, Tuple.to_list(shape)))
  def transpose(handle, axes), do: unwrap!(Native.transpose(handle, axes))

  def broadcast(handle, shape, axes),
    do: unwrap!(Native.broadcast(handle, Tuple.to_list(shape), axes))

  def slice(handle, start, lengths, steps),
    do: unwrap!(Native.slice(handle, start, lengths, steps))

  def reverse(handle, axes), do: unwrap!(Native.reverse(handle, axes))
  def contiguous(handle), do: unwrap!(Native.contiguous(handle))
  def pad(handle, value, config), do: unwrap!(Native.pad(handle, value, config))
  def put_slice(handle, start, update), do: unwrap!(Native.put_slice(handle, start, update))

  def concatenate(handles, axis, out),
    do: unwrap!(Native.concatenate(handles, axis, type_name(out)))

  @doc "A reduction (`:sum`, `:product`, `:reduce_max`, `:reduce_min`, `:all`, `:any`) over `axes`."
  def reduce(op, handle, axes, keep_axes, out) do
    {op, out} = {Atom.to_string(op), type_name(out)}

    nowait_or(Native.reduce_nowait(op, handle, axes, keep_axes, out), fn ->
      Native.reduce(op, handle, axes, keep_axes, out)
    end)
  end

  @doc "`:argmax` or `:argmin` along `axis` (`nil`: flattened); `tie_break` is `:low` or `:high`."
  def arg_reduce(op, handle, axis, keep_axis, tie_break, out) do
    {op, high, out} = {Atom.to_string(op), tie_break == :high, type_name(out)}

    nowait_or(Native.arg_reduce_nowait(op, handle, axis, keep_axis, high, out), fn ->
      Native.arg_reduce(op, handle, axis, keep_axis, high, out)
    end)
  end

  @doc "Nx.dot/6: contraction and batch axes of each operand."
  def dot(a, contract_a, batch_a, b, contract_b, batch_b, out),
    do: unwrap!(Native.dot(a, contract_a, batch_a, b, contract_b, batch_b, type_name(out)))

  @doc """
  Nx.gather: `indices[..., k]` indexes the increasing axes `axes` of `x`; the result has
  shape `indices.shape[:-1] ++ the other axes of x`. An out-of-range index raises
  `ArgumentError`.
  """
  def gather(x, indices, axes), do: unwrap!(Native.gather(x, indices, axes))

  @doc "Nx.take along `axis`: that axis replaced by the indices' dimensions."
  def take(x, indices, axis), do: unwrap!(Native.take(x, indices, axis))

  @doc "Nx.take_along_axis: `indices` has x's rank; the result has the indices' shape."
  def take_along_axis(x, indices, axis), do: unwrap!(Native.take_along_axis(x, indices, axis))

  @doc """
  Nx.indexed_add (`:add`) or Nx.indexed_put (`:put`): `indices` is `{n, k}` over the increasing
  `axes` of `target`, `updates` is `{n, ...}`; the result has `target`'s shape and type `out`.
  """
  def indexed(op, target, indices, updates, axes, out) when op in [:add, :put] do
    fun = if op == :add, do: &Native.indexed_add/5, else: &Native.indexed_put/5
    unwrap!(fun.(target, indices, updates, axes, type_name(out)))
  end

  @doc "Stable sort along `axis`, `direction` `:asc` or `:desc` (NaN last ascending, as Nx)."
  def sort(x, axis, direction) when direction in [:asc, :desc],
    do: unwrap!(Native.sort(x, axis, Atom.to_string(direction)))

  @doc "The positions that sort `x` along `axis`, as integers of type `out` (always stable)."
  def argsort(x, axis, direction, stable, out) when direction in [:asc, :desc],
    do:
      unwrap!(Native.argsort(x, axis, Atom.to_string(direction), stable == true, type_name(out)))

  @doc "Nx.top_k along the last axis: `{values, indices}`, indices of type `index_type`."
  def top_k(x, k, index_type), do: unwrap!(Native.top_k(x, k, type_name(index_type)))

  @doc "`:cumulative_sum`, `:cumulative_product`, `:cumulative_max` or `:cumulative_min` along `axis`."
  def cumulative(op, x, axis, reverse) do
    {op, reverse} = {Atom.to_string(op), reverse == true}
    nowait_or(Native.cumulative_nowait(op, x, axis, reverse), fn -> Native.cumulative(op, x, axis, reverse) end)
  end

  @doc """
  Nx.fft along `axis`, padded or truncated to `length`; real and imaginary parts with
  `|part| <= eps` become +0.0. The result is c64 (c128 for f64/c128 input).
  """
  def fft(x, axis, length, eps), do: unwrap!(Native.fft(x, axis, length, eps / 1))

  @doc "Nx.ifft, as `fft/4`."
  def ifft(x, axis, length, eps), do: unwrap!(Native.ifft(x, axis, length, eps / 1))

  @doc """
  `:window_sum`, `:window_product`, `:window_max` or `:window_min` with Nx's window options:
  `window` a tuple, `strides`/`dilations` lists, `padding` a list of `{lo, hi}`. The result
  has `x`'s type.
  """
  def window_reduce(op, x, window, strides, padding, dilations),
    do:
      unwrap!(
        Native.window_reduce(
          Atom.to_string(op),
          x,
          Tuple.to_list(window),
          strides,
          padding,
          dilations
        )
      )

  @doc """
  `:window_scatter_max` or `:window_scatter_min`: `source` scattered onto `x`'s shape at each
  window's max/min, over `init` (a one-element tensor); result of type `out`.
  """
  def window_scatter(op, x, source, init, window, strides, padding, out),
    do:
      unwrap!(
        Native.window_scatter(
          Atom.to_string(op),
          x,
          source,
          init,
          Tuple.to_list(window),
          strides,
          padding,
          type_name(out)
        )
      )

  @doc "Nx.conv with `Nx.Backend.conv/4`'s options (all given), written as type `out`."
  def conv(input, kernel, opts, out) do
    unwrap!(
      Native.conv(
        input,
        kernel,
        Keyword.fetch!(opts, :strides),
        Keyword.fetch!(opts, :padding),
        Keyword.fetch!(opts, :input_dilation),
        Keyword.fetch!(opts, :kernel_dilation),
        Keyword.fetch!(opts, :feature_group_size),
        Keyword.fetch!(opts, :batch_group_size),
        Keyword.fetch!(opts, :input_permutation),
        Keyword.fetch!(opts, :kernel_permutation),
        Keyword.fetch!(opts, :output_permutation),
        type_name(out)
      )
    )
  end

  @doc """
  How often each op took `NxVulkan.Backend`'s host fallback since the last
  `reset_fallbacks/0`, as `%{op => count}`. See `NxVulkan.Fallback`.
  """
  defdelegate fallbacks, to: NxVulkan.Fallback, as: :counts

  @doc "Sets every fallback count back to zero."
  defdelegate reset_fallbacks, to: NxVulkan.Fallback, as: :reset

  @doc """
  Strict mode for the calling process: `true` makes any host fallback raise
  `NxVulkan.FallbackError`, `false` allows it, `nil` follows `config :nx_vulkan, strict: ...`.
  Returns the previous process setting.
  """
  defdelegate strict(value), to: NxVulkan.Fallback

  @doc """
  The calling process's float precision for eager elementwise ops: `:exact` (Nx.BinaryBackend's
  bits), `:fast` (f32 math in f32, within 2 ulp, the same bits on every device), or `nil` to
  follow `config :nx_vulkan, precision: ...` (default `:exact`). Returns the previous process
  setting. See `NxVulkan.Precision`.
  """
  defdelegate precision(value), to: NxVulkan.Precision, as: :put

  @doc """
  Compiles a graph (the IR `NxVulkan.Compiler` lowers `defn` to) into a plan: `params` is
  `[{type, shape}]`, `nodes` `[{op, args, shape, type, attr}]` in topological order, `outputs`
  node indices; `precision`: `"exact"`, `"f32"` (dots accumulate in f32) or `"fast"` (that,
  and f32/f16/bf16 elementwise math in f32). Returns `{plan, {nodes, fused_kernels,
  inlined_nodes, family_steps, fused_prologues, fused_epilogues}}`.
  """
  def plan_compile(params, nodes, outputs, precision \\ "exact") do
    params = Enum.map(params, fn {type, shape} -> {type_name(type), Tuple.to_list(shape)} end)

    nodes =
      Enum.map(nodes, fn {op, args, shape, type, attr} ->
        {Atom.to_string(op), args, Tuple.to_list(shape), type_name(type), attr}
      end)

    unwrap!(Native.plan_compile(params, nodes, outputs, precision))
  end

  @doc "Runs a compiled plan on input handles (one recording, not waited for); output handles."
  def plan_run(plan, handles), do: unwrap!(Native.plan_run(plan, handles))

  @doc false
  def type_name({:f, bits}) when bits in [16, 32, 64], do: "f#{bits}"
  def type_name({:bf, 16}), do: "bf16"
  def type_name({:s, bits}) when bits in [8, 16, 32, 64], do: "s#{bits}"
  def type_name({:u, bits}) when bits in [8, 16, 32, 64], do: "u#{bits}"
  def type_name({:c, bits}) when bits in [64, 128], do: "c#{bits}"

  def type_name(other),
    do: raise(ArgumentError, "NxVulkan does not support the type #{inspect(other)}")

  @doc false
  def parse_type("bf16"), do: {:bf, 16}
  def parse_type(<<k, bits::binary>>), do: {List.to_atom([k]), String.to_integer(bits)}

  # A `*_nowait` NIF's answer: its result, or `:busy` where it would have waited or compiled
  # on this normal scheduler, and then `dirty` (the same call on a dirty scheduler) runs.
  defp nowait_or(:busy, dirty), do: unwrap!(dirty.())
  defp nowait_or(result, _dirty), do: unwrap!(result)

  defp unwrap!({:ok, value}), do: value

  # The engine asks for a collection after many new device buffers, or when a large buffer's
  # size class ran dry: dead handles hold device memory until the garbage collector frees them,
  # and they weigh almost nothing on the heap. A full collection: a young one here, with the
  # new result live, ages its handle so that later young collections never free it. Then a
  # yield: the collected handles' memory comes back only once the process leaves its
  # scheduler, and a loop of warm ops never does (every call stays on the normal scheduler).
  # On an H100, 40 16 M adds + waits allocated 38 results anew (259 µs each) without it and
  # none (98 µs) with it (stop 37, yield_probe8.exs).
  defp unwrap!({:ok, value, :gc}) do
    :erlang.garbage_collect()
    :erlang.yield()
    value
  end

  defp unwrap!(:ok), do: :ok
  defp unwrap!({:error, {:argument, message}}), do: raise(ArgumentError, message)
  defp unwrap!({:error, {kind, message}}), do: raise(NxVulkan.Error, kind: kind, message: message)
end
