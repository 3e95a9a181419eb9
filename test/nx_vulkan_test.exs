defmodule NxVulkanTest do
  use ExUnit.Case, async: false
  import Bitwise

  defp f32s(list), do: for(x <- list, into: <<>>, do: f32(x))
  defp f32(:nan), do: <<0x7FC00000::32-little>>
  defp f32(:inf), do: <<0x7F800000::32-little>>
  defp f32(:neg_inf), do: <<0xFF800000::32-little>>
  defp f32(:neg_zero), do: <<0x80000000::32-little>>
  defp f32(x), do: <<x::float-32-little>>

  test "reports the device it runs on" do
    info = NxVulkan.device_info()
    assert is_binary(info.name) and info.usable
    assert NxVulkan.info_report() =~ info.name
    assert [_ | _] = NxVulkan.devices()
  end

  test "mix nx_vulkan.info prints what nx-vulkan info prints" do
    cli = Path.expand("native/target/release/nx-vulkan")

    if File.exists?(cli) do
      {out, 0} = System.cmd(cli, ["info"])
      assert out == NxVulkan.info_report()
    end

    assert ExUnit.CaptureIO.capture_io(fn -> Mix.Tasks.NxVulkan.Info.run([]) end) =~ NxVulkan.device_info().name
  end

  test "NaN, ±Inf and -0.0 survive the round trip for every float type" do
    bin = f32s([:nan, :inf, :neg_inf, :neg_zero, 1.5, -2.25])
    h = NxVulkan.upload(bin, {:f, 32}, {6})
    assert NxVulkan.download(h) == bin
    assert NxVulkan.describe(h) == {{:f, 32}, {6}}

    f64 = <<0x7FF8000000000000::64-little, 0x7FF0000000000000::64-little, 0x8000000000000000::64-little, 1.0::float-64-little>>
    assert NxVulkan.download(NxVulkan.upload(f64, {:f, 64}, {4})) == f64

    f16 = <<0x7E00::16-little, 0x7C00::16-little, 0xFC00::16-little, 0x8000::16-little, 0x0001::16-little>>
    assert NxVulkan.download(NxVulkan.upload(f16, {:f, 16}, {5})) == f16
    assert NxVulkan.download(NxVulkan.upload(f16, {:bf, 16}, {5})) == f16
  end

  test "an add runs on the device and matches the CPU, counted in dispatches" do
    xs = Enum.map(0..1022, &(&1 * 0.37 - 100.0))
    a = NxVulkan.upload(f32s(xs), {:f, 32}, {1023})
    before = NxVulkan.stats().dispatches
    c = NxVulkan.binary(:add, a, a, {:f, 32})
    assert NxVulkan.stats().dispatches == before + 1
    expected = for x <- xs, into: <<>>, do: f32(elem(<<x::float-32>> |> then(fn <<y::float-32>> -> {y + y} end), 0))
    assert NxVulkan.download(c) == expected
  end

  test "integer ops wrap like Nx.BinaryBackend" do
    a = NxVulkan.upload(<<250, 5, 128>>, {:u, 8}, {3})
    b = NxVulkan.upload(<<10, 5, 128>>, {:u, 8}, {3})
    assert NxVulkan.download(NxVulkan.binary(:add, a, b, {:u, 8})) == <<4, 10, 0>>
    s = NxVulkan.upload(<<-128::8-signed, 127::8-signed>>, {:s, 8}, {2})
    assert NxVulkan.download(NxVulkan.unary(:negate, s, {:s, 8})) == <<-128::8-signed, -127::8-signed>>
  end

  test "views: transpose, slice and reverse read back correctly" do
    m = NxVulkan.iota({:s, 32}, {2, 3})
    t = NxVulkan.transpose(m, [1, 0])
    assert NxVulkan.describe(t) == {{:s, 32}, {3, 2}}
    assert NxVulkan.download(t) == for(x <- [0, 3, 1, 4, 2, 5], into: <<>>, do: <<x::32-signed-little>>)
    r = NxVulkan.reverse(NxVulkan.slice(m, [0, 1], [2, 2], [1, 1]), [0])
    assert NxVulkan.download(r) == for(x <- [4, 5, 1, 2], into: <<>>, do: <<x::32-signed-little>>)
  end

  test "reductions and dot from Elixir" do
    m = NxVulkan.iota({:s, 32}, {2, 3})
    assert NxVulkan.download(NxVulkan.reduce(:sum, m, [1], false, {:s, 64})) == <<3::64-little, 12::64-little>>
    assert NxVulkan.download(NxVulkan.arg_reduce(:argmax, m, 0, false, :low, {:s, 64})) == <<1::64-little, 1::64-little, 1::64-little>>
    # [[0,1,2],[3,4,5]] · [[0,1,2],[3,4,5]]ᵀ = [[5,14],[14,50]]
    d = NxVulkan.dot(m, [1], [], m, [1], [], {:s, 32})
    assert NxVulkan.download(d) == for(x <- [5, 14, 14, 50], into: <<>>, do: <<x::32-signed-little>>)
    assert_raise ArgumentError, fn -> NxVulkan.dot(m, [0], [], m, [1], [], {:s, 32}) end
  end

  describe "bad input gives a clear error and the VM keeps running" do
    test "wrong byte size" do
      assert_raise ArgumentError, ~r/3 bytes given .* needs 8/, fn -> NxVulkan.upload(<<1, 2, 3>>, {:f, 32}, {2}) end
    end

    test "mismatched shapes" do
      a = NxVulkan.upload(f32s([1.0, 2.0]), {:f, 32}, {2})
      b = NxVulkan.upload(f32s([1.0, 2.0, 3.0]), {:f, 32}, {3})
      assert_raise ArgumentError, ~r/cannot be broadcast/, fn -> NxVulkan.binary(:add, a, b, {:f, 32}) end
    end

    test "unsupported type and unknown op" do
      assert_raise ArgumentError, ~r/does not support the type/, fn -> NxVulkan.upload(<<>>, {:f, 8}, {0}) end
      a = NxVulkan.upload(f32s([1.0]), {:f, 32}, {1})
      assert_raise ArgumentError, ~r/unknown UnaryOp/, fn -> NxVulkan.unary(:frobnicate, a, {:f, 32}) end
      assert_raise ArgumentError, ~r/needs integer/, fn -> NxVulkan.unary(:bitwise_not, a, {:f, 32}) end
    end

    test "dead handle" do
      a = NxVulkan.upload(f32s([1.0]), {:f, 32}, {1})
      assert NxVulkan.deallocate(a) == :ok
      assert NxVulkan.deallocate(a) == :already_deallocated
      assert_raise ArgumentError, ~r/deallocated/, fn -> NxVulkan.download(a) end
      assert_raise ArgumentError, ~r/deallocated/, fn -> NxVulkan.binary(:add, a, a, {:f, 32}) end
    end

    test "huge allocation" do
      assert_raise NxVulkan.Error, ~r/out of device memory/, fn -> NxVulkan.iota({:f, 64}, {(1 <<< 31) - 1}) end
      assert_raise ArgumentError, ~r/elements/, fn -> NxVulkan.iota({:f, 64}, {1 <<< 40}) end
      assert_raise ArgumentError, ~r/elements/, fn -> NxVulkan.iota({:u, 8}, {1 <<< 20, 1 <<< 20, 1 <<< 20}) end
    end

    test "garbage terms" do
      assert_raise ArgumentError, fn -> NxVulkan.Native.download(:not_a_handle) end
      assert_raise ArgumentError, fn -> NxVulkan.Native.upload(:garbage, "f32", [1]) end
      assert_raise ArgumentError, fn -> NxVulkan.Native.transpose(make_ref(), [0]) end
      assert_raise ArgumentError, fn -> NxVulkan.upload(<<0::32>>, {:f, 32}, {-1}) end
    end

    test "improper lists are argument errors, not caught panics" do
      # (rustler's own list decoder panicked on them: :nif_panicked, an ErlangError)
      a = NxVulkan.upload(f32s([1.0, 2.0, 3.0, 4.0]), {:f, 32}, {4})
      assert_raise ArgumentError, fn -> NxVulkan.Native.upload(f32s([1.0, 2.0]), "f32", [1 | 2]) end
      assert_raise ArgumentError, fn -> NxVulkan.Native.reshape(a, [2 | 2]) end
      assert_raise ArgumentError, fn -> NxVulkan.Native.slice(a, [0], [2 | 1], [1]) end
      assert_raise ArgumentError, fn -> NxVulkan.Native.pad(a, a, [{0, 1, 0} | :tail]) end
      assert_raise ArgumentError, fn -> NxVulkan.Native.concatenate([a | a], 0, "f32") end
      # inside a plan node's attribute (decoded from a term after the call)
      nodes = [{"parameter", [], [4], "f32", 0}, {"sum", [0], [], "f32", [0 | 1]}]
      assert {:error, {:argument, m}} = NxVulkan.Native.plan_compile([{"f32", [4]}], nodes, [1], "exact")
      assert m =~ "improper list"
      # the proper lists still work
      b = NxVulkan.Native.reshape(a, [2, 2]) |> elem(1)
      assert NxVulkan.Native.describe(b) == {:ok, {"f32", [2, 2]}}
    end
  end

  test "buffers return to the pool when handles are garbage-collected" do
    :erlang.garbage_collect()
    base = NxVulkan.stats().live_buffers

    pid =
      spawn(fn ->
        for _ <- 1..50, do: NxVulkan.upload(f32s([1.0, 2.0]), {:f, 32}, {2})
        receive do: (:stop -> :ok)
      end)

    Process.sleep(200)
    send(pid, :stop)
    Process.sleep(100)
    :erlang.garbage_collect()
    assert NxVulkan.stats().live_buffers <= base
  end

  @tag timeout: 300_000
  test "64 processes × 1,000 ops at once, every result checked" do
    procs = 64
    ops = String.to_integer(System.get_env("NX_VULKAN_ENDURANCE_OPS", "1000"))

    tasks =
      for p <- 1..procs do
        Task.async(fn ->
          x = NxVulkan.upload(<<p::32-signed-little, (p * 2)::32-signed-little>>, {:s, 32}, {2})

          Enum.reduce(1..ops, 0, fn i, bad ->
            y = NxVulkan.binary(:add, x, NxVulkan.upload(<<i::32-signed-little>>, {:s, 32}, {}), {:s, 32})
            if NxVulkan.download(y) == <<(p + i)::32-signed-little, (2 * p + i)::32-signed-little>>, do: bad, else: bad + 1
          end)
        end)
      end

    assert Enum.map(tasks, &Task.await(&1, :infinity)) |> Enum.sum() == 0
  end
end
