defmodule NxVulkan.DiskCacheTest do
  @moduledoc """
  The on-disk SPIR-V cache across VMs: a fresh VM compiles and writes it, the next VM builds
  the same kernels without compiling, and damaged files are ignored, counted and rebuilt —
  with the same results every time. Each VM is a separate `elixir` process on this build.
  """
  use ExUnit.Case, async: false
  @moduletag timeout: 300_000

  # Runs a few kernels (elementwise, reduction, a plan) and prints stats and result bytes.
  @script ~S"""
  x = NxVulkan.upload(<<1.5::float-32-little, -2.0::float-32-little, 0.25::float-32-little>>, {:f, 32}, {3})
  e = NxVulkan.unary(:exp, x, {:f, 32})
  s = NxVulkan.reduce(:sum, e, [0], false, {:f, 32})
  {plan, _} = NxVulkan.plan_compile([{{:f, 32}, {3}}], [{:parameter, [], {3}, {:f, 32}, 0}, {:tanh, [0], {3}, {:f, 32}, nil}], [1])
  [t] = NxVulkan.plan_run(plan, [x])
  bytes = NxVulkan.download(e) <> NxVulkan.download(s) <> NxVulkan.download(t)
  st = NxVulkan.stats()
  IO.puts("RESULT #{st.spirv_disk_hits} #{st.spirv_disk_misses} #{st.spirv_disk_rejected} #{Base.encode16(bytes)}")
  """

  defp run_vm(cache_dir) do
    lib = :code.lib_dir(:nx_vulkan) |> to_string() |> Path.dirname()
    env = [{"NX_VULKAN_CACHE_DIR", cache_dir}, {"ERL_LIBS", lib}]
    {out, 0} = System.cmd(System.find_executable("elixir"), ["-e", @script], env: env, stderr_to_stdout: true)
    [_, hits, misses, rejected, bytes] = Regex.run(~r/RESULT (\d+) (\d+) (\d+) (\w+)/, out)
    {String.to_integer(hits), String.to_integer(misses), String.to_integer(rejected), bytes, out}
  end

  test "a new VM reads SPIR-V from disk; damaged files are rebuilt" do
    dir = Path.join(System.tmp_dir!(), "nx_vulkan_disk_cache_#{System.unique_integer([:positive])}")
    File.rm_rf!(dir)

    try do
      {0, cold, 0, bytes, _} = run_vm(dir)
      assert cold > 0
      spv = Path.wildcard(Path.join([dir, "spirv", "*.spv"]))
      assert length(spv) == cold

      {warm, 0, 0, ^bytes, _} = run_vm(dir)
      assert warm == cold

      # truncated, junk and another shader's file in place of each entry
      [first, second | rest] = spv
      original = File.read!(first)
      File.write!(first, binary_part(original, 0, 40))
      File.write!(second, :rand.bytes(200))
      for f <- rest, do: File.write!(f, original)
      {hits, misses, rejected, ^bytes, out} = run_vm(dir)
      assert {hits, misses, rejected} == {0, cold, cold}
      assert out =~ "ignoring damaged or foreign SPIR-V cache file"

      # rebuilt: whole again
      {^cold, 0, 0, ^bytes, _} = run_vm(dir)
    after
      File.rm_rf!(dir)
    end
  end
end
