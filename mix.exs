defmodule Mix.Tasks.Compile.NxVulkanCargo do
  @moduledoc """
  Builds the NIF with cargo and copies it into `priv/` (rustler's Hex package is not needed).

  Set `NX_VULKAN_SKIP_CARGO=1` to use a library already in `priv/`, and
  `NX_VULKAN_CARGO_PROFILE=dev` for a debug build (default: release).
  """
  use Mix.Task.Compiler

  @impl true
  def run(_args) do
    # priv/ is linked into _build only if it exists when the build structure is made.
    File.mkdir_p!("priv")
    Mix.Project.build_structure()

    if System.get_env("NX_VULKAN_SKIP_CARGO") in ["1", "true"] do
      {:noop, []}
    else
      profile = System.get_env("NX_VULKAN_CARGO_PROFILE", "release")
      args = ["build", "-p", "nx_vulkan_nif", "--profile", profile]

      case System.cmd("cargo", args, cd: "native", into: IO.stream(:stdio, :line), stderr_to_stdout: true) do
        {_, 0} ->
          dir = if profile == "dev", do: "debug", else: profile
          # Copy then rename: overwriting the library in place crashes a VM that has it loaded.
          tmp = "priv/libnx_vulkan_nif.so.tmp"
          File.cp!(Path.join(["native", "target", dir, "libnx_vulkan_nif.so"]), tmp)
          File.rename!(tmp, "priv/libnx_vulkan_nif.so")
          {:ok, []}

        {_, status} ->
          Mix.raise("cargo build of the NIF failed (exit #{status})")
      end
    end
  end
end

defmodule NxVulkan.MixProject do
  use Mix.Project

  @version "0.1.0"

  def project do
    [
      app: :nx_vulkan,
      version: @version,
      elixir: "~> 1.14",
      compilers: [:nx_vulkan_cargo] ++ Mix.compilers(),
      start_permanent: Mix.env() == :prod,
      # Modules that need Nx compile only when Nx is loadable; a build with Nx gets its own
      # build directory so Mix recompiles when Nx appears or disappears.
      build_path: if(nx_on_code_path?(), do: "_build_nx", else: "_build"),
      # Elixir >= 1.15 prunes code paths that are not dependencies, which would hide an Nx
      # taken from the code path (ERL_LIBS) and silently build without the backend.
      prune_code_paths: not nx_on_code_path?(),
      deps: deps(),
      # Nx taken from the code path is not a Mix dependency; do not warn about calls into it.
      xref: [exclude: if(deps() == [], do: [Nx, Nx.Backend, Nx.BinaryBackend, Nx.Type, Nx.Defn, Nx.Defn.Composite, Nx.Defn.Evaluator], else: [])],
      description: "Nx backend, Defn compiler and model runtimes on Vulkan (vulkano)",
      package: [licenses: ["Apache-2.0"], files: ~w(lib native/engine native/nif native/cli native/Cargo.toml native/Cargo.lock native/.cargo mix.exs README.md)]
    ]
  end

  def application do
    [extra_applications: [:logger]]
  end

  # Nx comes from Hex where Hex is installed. Where it is not (no registry), Nx may come from
  # the code path (ERL_LIBS); Mix must never fail for want of Hex.
  defp deps do
    if Code.ensure_loaded?(Hex) and not nx_on_code_path?() do
      [{:nx, "~> 0.7"}]
    else
      []
    end
  end

  defp nx_on_code_path? do
    match?({:ok, _}, :application.get_key(:nx, :vsn)) or :code.lib_dir(:nx) |> is_list()
  end
end
