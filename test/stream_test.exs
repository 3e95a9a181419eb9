defmodule NxVulkan.StreamTest do
  # Ops are queued, not waited for. These tests check that results, ordering across processes,
  # error reporting and memory accounting hold from Elixir.
  use ExUnit.Case, async: false
  import Bitwise

  defp s32s(list), do: for(x <- list, into: <<>>, do: <<x::32-signed-little>>)

  test "an op returns before its work has run, and a download waits for it" do
    NxVulkan.synchronize()
    big = NxVulkan.iota({:f, 32}, {1 <<< 20})
    before = NxVulkan.stats()
    y = Enum.reduce(1..10, big, fn _, acc -> NxVulkan.unary(:sin, acc, {:f, 32}) end)
    queued = NxVulkan.stats()
    assert queued.recordings - before.recordings == 10
    assert queued.dispatches - before.dispatches == 10
    assert byte_size(NxVulkan.download(y)) == 4 <<< 20
    assert NxVulkan.stats().in_flight == 0
  end

  test "handles passed between processes are used in call order with no synchronisation" do
    parent = self()
    n = 200

    producer =
      spawn_link(fn ->
        for i <- 1..n do
          a = NxVulkan.upload(s32s([i, -i, 3]), {:s, 32}, {3})
          b = NxVulkan.binary(:multiply, a, a, {:s, 32})
          send(parent, {:tensor, i, b})
        end
      end)

    results =
      for _ <- 1..n do
        receive do
          {:tensor, i, b} ->
            c = NxVulkan.binary(:add, b, b, {:s, 32})
            NxVulkan.download(c) == s32s([2 * i * i, 2 * i * i, 18])
        after
          30_000 -> flunk("producer stalled")
        end
      end

    assert Enum.all?(results)
    assert is_pid(producer)
  end

  @tag timeout: 600_000
  test "64 processes × 1,000 queued ops, handles handed between processes, every result checked" do
    procs = 64
    ops = String.to_integer(System.get_env("NX_VULKAN_ENDURANCE_OPS", "1000"))
    one = NxVulkan.upload(s32s([1]), {:s, 32}, {})
    # Process p builds a chain of queued adds and hands its tensor to process p+1 at the end;
    # each process checks what it received from its neighbour (never synchronising first).
    tasks =
      for p <- 1..procs do
        Task.async(fn ->
          x = NxVulkan.upload(s32s([p, 2 * p]), {:s, 32}, {2})
          y = Enum.reduce(1..ops, x, fn _, acc -> NxVulkan.binary(:add, acc, one, {:s, 32}) end)

          receive do
            {:next, pid} -> send(pid, {:from, p, y})
          end

          receive do
            {:from, q, t} ->
              z = NxVulkan.binary(:subtract, t, one, {:s, 32})
              NxVulkan.download(z) == s32s([q + ops - 1, 2 * q + ops - 1])
          after
            300_000 -> false
          end
        end)
      end

    pids = Enum.map(tasks, & &1.pid)
    for {pid, next} <- Enum.zip(pids, tl(pids) ++ [hd(pids)]), do: send(pid, {:next, next})
    assert Enum.map(tasks, &Task.await(&1, :infinity)) |> Enum.all?()
    NxVulkan.synchronize()
    :erlang.garbage_collect()
  end

  test "dead handles do not fill device memory: the engine asks the caller to collect" do
    # 200 × 8 MB of results that become garbage at once; only the collector frees them.
    task =
      Task.async(fn ->
        x = NxVulkan.iota({:f, 32}, {2 <<< 20})

        peak =
          Enum.reduce(1..200, 0, fn _, peak ->
            _ = NxVulkan.unary(:negate, x, {:f, 32})
            max(peak, NxVulkan.stats().live_bytes)
          end)

        NxVulkan.synchronize()
        peak
      end)

    peak = Task.await(task, 120_000)
    # 1.6 GB of garbage over the run; the hint (every 256 MiB of new buffers) keeps it bounded.
    assert peak < 700 <<< 20, "peak live bytes #{peak}"
  end

  test "a loop of large ops reuses its buffers: a large size class that runs dry asks for a collection" do
    # 60 adds of 4 M f32 (16 MiB results) through NxVulkan.binary/4, each result dead at once.
    # Without a collection about half of them allocated anew (stop 34: 10 of 20 at 64 MiB);
    # with a full one when the class runs dry the first few do and the rest reuse. A young
    # collection there (stops 34-36) collected while the new result was live, which aged its
    # handle so that later young collections never freed it: here live results climbed to 45
    # and 43 of the 60 adds allocated (stop 37).
    task =
      Task.async(fn ->
        x = NxVulkan.iota({:f, 32}, {4 <<< 20})
        y = NxVulkan.unary(:sin, x, {:f, 32})
        NxVulkan.synchronize()
        # Start with no cached buffers: earlier tests' 16 MiB buffers would keep the size
        # class from running dry, and then fewer ops ask for a collection.
        NxVulkan.trim_pool()
        before = NxVulkan.stats()

        lives =
          for _ <- 1..60 do
            NxVulkan.binary(:add, x, y, {:f, 32})
            NxVulkan.synchronize()
            NxVulkan.stats().live_buffers - before.live_buffers
          end

        after_ = NxVulkan.stats()
        {after_.device_allocations - before.device_allocations, after_.reuses - before.reuses, lives}
      end)

    {fresh, reuses, lives} = Task.await(task, 120_000)
    assert fresh <= 10, "#{fresh} new device buffers in 60 large adds; live results per call #{inspect(lives)}"
    assert reuses >= 50
    # dead results not yet collected (the natural collections leave up to about 8)
    assert Enum.max(lives) <= 12, "live 16 MiB results per call: #{inspect(lives)}"
  end

  test "synchronous mode gives the same bits as queued mode" do
    xs = for i <- 0..4098, into: <<>>, do: <<i * 0.013 - 20.0::float-32-little>>
    run = fn ->
      x = NxVulkan.upload(xs, {:f, 32}, {4099})
      e = NxVulkan.unary(:exp, x, {:f, 32})
      s = NxVulkan.reduce(:sum, e, [0], false, {:f, 32})
      m = NxVulkan.reshape(NxVulkan.slice(x, [0], [4096], [1]), {64, 64})
      d = NxVulkan.dot(m, [1], [], m, [0], [], {:f, 32})
      c = NxVulkan.cumulative(:cumulative_sum, x, 0, false)
      Enum.map([e, s, d, c], &NxVulkan.download/1)
    end

    previous = NxVulkan.synchronous(false)
    queued = run.()
    false = NxVulkan.synchronous(true)

    try do
      before = NxVulkan.stats()
      waited = run.()
      after_ = NxVulkan.stats()
      assert queued == waited
      assert after_.submits - before.submits >= after_.recordings - before.recordings
    after
      NxVulkan.synchronous(previous)
    end
  end

  test "a warm op is queued from a normal scheduler; one that would compile or wait declines" do
    x = NxVulkan.upload(<<1.0::float-32-little, 4.0::float-32-little>>, {:f, 32}, {2})
    NxVulkan.download(NxVulkan.unary(:sqrt, x, {:f, 32}))
    assert {:ok, y} = NxVulkan.Native.unary_nowait("sqrt", x, "f32", false)
    assert NxVulkan.download(y) == <<1.0::float-32-little, 2.0::float-32-little>>
    # A kernel never built here (a new op and type pair) must not be compiled on a scheduler.
    assert NxVulkan.Native.binary_nowait("atan2", x, x, "f64", false) == :busy
    assert NxVulkan.download(NxVulkan.binary(:atan2, x, x, {:f, 64})) |> byte_size() == 16
    assert {:ok, _} = NxVulkan.Native.binary_nowait("atan2", x, x, "f64", false)
    # The same for reductions, arg-reductions and scans (warmed by their dirty forms first)
    NxVulkan.download(NxVulkan.reduce(:sum, x, [0], false, {:f, 32}))
    NxVulkan.download(NxVulkan.arg_reduce(:argmax, x, 0, false, :low, {:s, 64}))
    NxVulkan.download(NxVulkan.cumulative(:cumulative_sum, x, 0, false))
    assert {:ok, s} = NxVulkan.Native.reduce_nowait("sum", x, [0], false, "f32")
    assert NxVulkan.download(s) == <<5.0::float-32-little>>
    assert {:ok, i} = NxVulkan.Native.arg_reduce_nowait("argmax", x, 0, false, false, "s64")
    assert NxVulkan.download(i) == <<1::signed-64-little>>
    assert {:ok, c} = NxVulkan.Native.cumulative_nowait("cumulative_sum", x, 0, false)
    assert NxVulkan.download(c) == <<1.0::float-32-little, 5.0::float-32-little>>
    # Synchronous mode waits for every op: never on a normal scheduler.
    previous = NxVulkan.synchronous(true)

    try do
      assert NxVulkan.Native.unary_nowait("sqrt", x, "f32", false) == :busy
      assert NxVulkan.Native.reduce_nowait("sum", x, [0], false, "f32") == :busy
      assert NxVulkan.Native.arg_reduce_nowait("argmax", x, 0, false, false, "s64") == :busy
      assert NxVulkan.Native.cumulative_nowait("cumulative_sum", x, 0, false) == :busy
      assert NxVulkan.download(NxVulkan.unary(:sqrt, x, {:f, 32})) == <<1.0::float-32-little, 2.0::float-32-little>>
    after
      NxVulkan.synchronous(previous)
    end

    assert_raise ArgumentError, ~r/deallocated/, fn ->
      d = NxVulkan.upload(<<0::32>>, {:f, 32}, {1})
      NxVulkan.deallocate(d)
      NxVulkan.unary(:exp, d, {:f, 32})
    end
  end

  test "a small read-back is collected from a normal scheduler or left pending; a large one declines" do
    x = NxVulkan.upload(<<1.0::float-32-little, 4.0::float-32-little>>, {:f, 32}, {2})
    y = NxVulkan.unary(:sqrt, x, {:f, 32})
    want = <<1.0::float-32-little, 2.0::float-32-little>>

    case NxVulkan.Native.download_nowait(y) do
      {:ok, bin} ->
        assert bin == want

      {:pending, read} ->
        assert NxVulkan.Native.download_finish(read) == {:ok, want}
        assert {:error, {:argument, msg}} = NxVulkan.Native.download_finish(read)
        assert msg =~ "already collected"
    end

    # Once the device has run it, the read-back needs no wait at all.
    NxVulkan.synchronize()
    assert NxVulkan.Native.download_nowait(y) == {:ok, want}
    # Over 64 KiB: the copy is not done on a scheduler thread.
    big = NxVulkan.iota({:f, 32}, {16_385})
    assert NxVulkan.Native.download_nowait(big) == :busy
    assert byte_size(NxVulkan.download(big)) == 65_540
    # A pending read-back nobody collects is dropped with its process; the engine goes on.
    task =
      Task.async(fn ->
        _busy = Enum.reduce(1..4, big, fn _, t -> NxVulkan.unary(:sin, t, {:f, 32}) end)
        match?({kind, _} when kind in [:ok, :pending], NxVulkan.Native.download_nowait(NxVulkan.unary(:exp, x, {:f, 32})))
      end)

    assert Task.await(task)
    :erlang.garbage_collect()
    assert NxVulkan.download(NxVulkan.unary(:sqrt, x, {:f, 32})) == want
    assert_raise ArgumentError, fn -> NxVulkan.Native.download_finish(x) end
    # Small uploads likewise, byte for byte; over 64 KiB they decline.
    bytes = :crypto.strong_rand_bytes(4 * 999)
    # (`{:ok, handle, :gc}` when the pool asks for a collection, as every tensor
    # result may.)
    u =
      case NxVulkan.Native.upload_nowait(bytes, "u32", [999]) do
        {:ok, u} -> u
        {:ok, u, :gc} -> u
      end

    assert NxVulkan.download(u) == bytes
    assert NxVulkan.Native.upload_nowait(:binary.copy(<<0>>, 65_537), "u8", [65_537]) == :busy
    assert {:error, {:argument, _}} = NxVulkan.Native.upload_nowait(bytes, "u32", [1000])
    # synchronize likewise: done on this scheduler when the device is idle, else :busy.
    assert NxVulkan.Native.synchronize_nowait() == {:ok, :ok}
    _queued = Enum.reduce(1..4, big, fn _, t -> NxVulkan.unary(:sin, t, {:f, 32}) end)
    assert NxVulkan.Native.synchronize_nowait() in [{:ok, :ok}, :busy]
    assert NxVulkan.synchronize() == :ok
    assert NxVulkan.Native.synchronize_nowait() == {:ok, :ok}
  end

  test "profile/1 reports device time per kernel for what ran inside it" do
    x = NxVulkan.iota({:f, 32}, {4096})
    NxVulkan.download(NxVulkan.unary(:exp, x, {:f, 32}))

    {bytes, report} =
      NxVulkan.profile(fn ->
        y = Enum.reduce(1..3, x, fn _, acc -> NxVulkan.unary(:exp, acc, {:f, 32}) end)
        NxVulkan.download(y)
      end)

    assert byte_size(bytes) == 4 * 4096
    assert [%{runs: 3, device_us: us} | _] = Enum.filter(report.kernels, &(&1.name =~ "Exp"))
    assert us > 0 and report.device_us >= us and report.host_us > 0
    # Timing stops even when the function raises.
    assert_raise RuntimeError, fn -> NxVulkan.profile(fn -> raise "boom" end) end
    {_, again} = NxVulkan.profile(fn -> :ok end)
    assert again.kernels == []
  end

  test "a failure in queued work raises at the next sync point, naming the op; the VM keeps running" do
    NxVulkan.synchronize()
    # Queued mode (also under NX_VULKAN_SYNC=1): the failure must surface at the sync point.
    previous = NxVulkan.synchronous(false)
    on_exit(fn -> NxVulkan.synchronous(previous) end)
    x = NxVulkan.upload(<<1.0::float-32-little, 2.0::float-32-little>>, {:f, 32}, {2})
    :ok = NxVulkan.inject_failure("simulated device fault")
    y = NxVulkan.unary(:exp, x, {:f, 32})
    err = assert_raise NxVulkan.Error, fn -> NxVulkan.download(y) end
    assert err.message =~ "simulated device fault"
    assert String.downcase(err.message) =~ "exp"
    # Reported once; later work is fine.
    :ok = NxVulkan.synchronize()
    z = NxVulkan.unary(:negate, x, {:f, 32})
    assert NxVulkan.download(z) == <<-1.0::float-32-little, -2.0::float-32-little>>
  end
end
