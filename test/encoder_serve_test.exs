defmodule NxVulkan.EncoderServeTest do
  @moduledoc """
  The three ways to an embedding give the same bits: `NxVulkan.Encoder.embed/3`, the
  `nx-vulkan serve` HTTP server (`POST /v1/embeddings`, base64 answers: the f32 bytes) and
  `nx-vulkan encode` (JSON lines), on all-MiniLM-L6-v2 on the same device. The server is the
  release binary `make test` builds, run on a loopback port of its choosing.
  """
  use ExUnit.Case, async: false
  @moduletag timeout: 600_000

  @dir System.get_env("NX_VULKAN_MINILM_DIR") ||
         Path.join(System.get_env("NX_VULKAN_MODEL_CACHE") || Path.expand("~/.cache/nx_vulkan/models"), "all-MiniLM-L6-v2")
  @cli Path.expand("native/target/release/nx-vulkan")

  @texts ["hello world", "", "東京の天気 🌦️ naïve café", String.duplicate("long input ", 200), "fn main() { }"]

  setup_all do
    unless File.exists?(@cli), do: raise("#{@cli} is missing: build the workspace (make build)")
    unless File.exists?(Path.join(@dir, "model.safetensors")), do: raise("#{@dir}: run scripts/fetch-minilm.sh")
    {:ok, _} = Application.ensure_all_started(:inets)
    %{encoder: NxVulkan.Encoder.load!(@dir)}
  end

  defp json_string(s) do
    escaped =
      s
      |> String.replace("\\", "\\\\")
      |> String.replace("\"", "\\\"")
      |> String.replace("\n", "\\n")

    ~s("#{escaped}")
  end

  # Starts `nx-vulkan serve` on port 0 and returns {port, base_url} once it listens.
  defp start_server do
    port =
      Port.open({:spawn_executable, @cli}, [
        :binary,
        :exit_status,
        :stderr_to_stdout,
        args: ["serve", "--model", @dir, "--port", "0", "--batch", "4"],
        env: [{~c"NX_VULKAN_CACHE_DIR", String.to_charlist(System.get_env("NX_VULKAN_CACHE_DIR") || "")}]
      ])

    url = await_url(port, "")
    {port, url}
  end

  defp await_url(port, seen) do
    receive do
      {^port, {:data, data}} ->
        seen = seen <> data

        case Regex.run(~r{at (http://[^/\s]+)/v1/embeddings}, seen) do
          [_, url] -> url
          nil -> await_url(port, seen)
        end

      {^port, {:exit_status, status}} ->
        flunk("nx-vulkan serve exited with #{status}: #{seen}")
    after
      300_000 -> flunk("nx-vulkan serve did not start: #{seen}")
    end
  end

  defp stop_server(port) do
    {:os_pid, pid} = Port.info(port, :os_pid)
    System.cmd("kill", ["-TERM", to_string(pid)])

    receive do
      {^port, {:exit_status, status}} -> status
    after
      60_000 -> flunk("nx-vulkan serve did not stop on SIGTERM")
    end
  end

  defp post(url, body) do
    {:ok, {{_, status, _}, _headers, answer}} =
      :httpc.request(:post, {String.to_charlist(url <> "/v1/embeddings"), [], ~c"application/json", body}, [timeout: 300_000], body_format: :binary)

    {status, answer}
  end

  test "HTTP, the CLI and embed/3 answer the same bits", %{encoder: e} do
    want = NxVulkan.Encoder.embed(e, @texts, format: :binary)
    {port, url} = start_server()

    try do
      body = ~s({"input": [#{Enum.map_join(@texts, ", ", &json_string/1)}], "encoding_format": "base64"})
      {200, answer} = post(url, body)
      got = Regex.scan(~r/"embedding":"([A-Za-z0-9+\/=]+)"/, answer) |> Enum.map(fn [_, b64] -> Base.decode64!(b64) end)
      assert got == want
      assert answer =~ ~s("truncated":[3])
      assert answer =~ ~s("device":"#{e.device}")

      # requests from many clients at once are batched and still answered with the same bits
      tasks =
        for i <- 0..15 do
          Task.async(fn ->
            text = Enum.at(@texts, rem(i, length(@texts)))
            {200, a} = post(url, ~s({"input": #{json_string(text)}, "encoding_format": "base64"}))
            [[_, b64]] = Regex.scan(~r/"embedding":"([A-Za-z0-9+\/=]+)"/, a)
            {rem(i, length(@texts)), Base.decode64!(b64)}
          end)
        end

      for {i, bin} <- Task.await_many(tasks, 300_000), do: assert(bin == Enum.at(want, i))

      # malformed JSON is a 400 and the server keeps serving
      {400, bad} = post(url, "{not json")
      assert bad =~ "error"
      {200, _} = post(url, ~s({"input": "still serving"}))
    after
      assert stop_server(port) == 0
    end

    # the CLI: JSON lines in, JSON lines out; floats printed so that they read back as the same f32
    input = Enum.map_join(@texts, "\n", &json_string/1) <> "\n"
    file = Path.join(System.tmp_dir!(), "nx_vulkan_encode_#{System.unique_integer([:positive])}.jsonl")
    File.write!(file, input)
    {out, 0} = System.cmd(@cli, ["encode", "--model", @dir, "--input", file, "--batch", "2"], stderr_to_stdout: false)
    File.rm!(file)
    lines = String.split(out, "\n", trim: true)
    assert length(lines) == length(@texts)

    for {line, bin} <- Enum.zip(lines, want) do
      [_, nums] = Regex.run(~r/"embedding":\[([^\]]*)\]/, line)

      floats =
        for n <- String.split(nums, ","), into: <<>> do
          {v, ""} = Float.parse(n)
          <<v::little-float-32>>
        end

      assert floats == bin
    end
  end
end
