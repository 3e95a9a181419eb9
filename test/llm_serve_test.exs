defmodule NxVulkan.LLMServeTest do
  @moduledoc """
  The GGUF runtime from the command line and over HTTP, on SmolLM2-135M-Instruct (Q4_1,
  fetched by scripts/fetch-smollm2.sh): `nx-vulkan chat` (stdin lines in, answers out),
  `nx-vulkan generate --json` (greedy token ids against the float64 reference,
  test/llm/smollm2-reference.json) and `nx-vulkan serve` (OpenAI's /v1/chat/completions whole
  and streamed, /v1/models, bad requests, two streams at once, /metrics; and with
  `--int8-activations`). The binary is the release build `make test` makes. Every answer here
  is greedy, so every path must give the reference's "The capital of France is Paris." and
  stop on <|im_end|>: 7 tokens and the end token. Tokens are kept few (lavapipe decodes ≈ 2–3 s
  each): 59 in the whole file.
  """
  use ExUnit.Case, async: false
  @moduletag timeout: 600_000

  @gguf System.get_env("NX_VULKAN_SMOLLM2") ||
          Path.join(
            System.get_env("NX_VULKAN_MODEL_CACHE") || Path.expand("~/.cache/nx_vulkan/models"),
            "SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
          )
  @cli Path.expand("native/target/release/nx-vulkan")
  @reference File.read!("test/llm/smollm2-reference.json")

  @system "You are a helpful assistant."
  @question "What is the capital of France?"
  @answer "The capital of France is Paris."
  @messages ~s([{"role": "system", "content": "#{@system}"}, {"role": "user", "content": "#{@question}"}])
  # The reference's chat prompt is 27 tokens; its answer 7 and <|im_end|> (checked below).
  @prompt_tokens 27
  @completion_tokens 8

  setup_all do
    unless File.exists?(@cli), do: raise("#{@cli} is missing: build the workspace (make build)")
    unless File.exists?(@gguf), do: raise("#{@gguf} is missing: run scripts/fetch-smollm2.sh")
    {:ok, _} = Application.ensure_all_started(:inets)
    :ok
  end

  defp reference_ids(key) do
    [_, body] = Regex.run(~r/"#{key}":\s*\[([^\]]*)\]/s, @reference)
    body |> String.split(",", trim: true) |> Enum.map(&String.to_integer(String.trim(&1)))
  end

  test "the reference's chat messages and prompt are the ones this file sends" do
    assert @reference =~ ~r/"role": "system",\s*"content": "#{@system}"/
    assert @reference =~ ~r/"role": "user",\s*"content": "#{Regex.escape(@question)}"/
    assert length(reference_ids("prompt_ids")) == @prompt_tokens
    assert @reference =~ ~s("greedy_text": "#{@answer}<|im_end|>)
    # <|im_end|> (id 2) ends the answer and counts as a completion token
    assert Enum.find_index(reference_ids("greedy_ids"), &(&1 == 2)) == @completion_tokens - 1
  end

  test "nx-vulkan chat answers a message from standard input" do
    # $0 is the binary; the message, model and system text are arguments: no shell quoting needed.
    script = ~s(printf '%s\\n' "$1" | "$0" chat --model "$2" --system "$3" --max-tokens 16)
    {out, status} = System.cmd("sh", ["-c", script, @cli, @question, @gguf, @system])
    assert status == 0, out
    assert @answer in String.split(out, "\n"), "stdout: #{inspect(out)}"
  end

  test "nx-vulkan generate --json: the greedy tokens are the reference's" do
    args = ["generate", "--model", @gguf, "--chat", "--system", @system, "--prompt", @question, "--max-tokens", "8", "--json"]
    {out, status} = System.cmd(@cli, args)
    assert status == 0, out
    [_, ids] = Regex.run(~r/"tokens":\[([^\]]*)\]/, out)
    assert Enum.map(String.split(ids, ","), &String.to_integer/1) == Enum.take(reference_ids("greedy_ids"), 8)
    assert out =~ ~s("text":"#{@answer}")
    assert out =~ ~s("finish_reason":"stop")
    assert out =~ ~s("prompt_tokens":#{@prompt_tokens})
    assert out =~ ~s("completion_tokens":#{@completion_tokens})
  end

  test "nx-vulkan generate --prefill-precision: f16 accepted, a bad value refused" do
    # A 27-token prompt runs on the matvec (the GEMM takes 32 rows and more, on tensor cores),
    # so the greedy ids are the reference's at either precision.
    args = ["generate", "--model", @gguf, "--chat", "--system", @system, "--prompt", @question, "--max-tokens", "2", "--json"]
    {out, status} = System.cmd(@cli, args ++ ["--prefill-precision", "f16"])
    assert status == 0, out
    [_, ids] = Regex.run(~r/"tokens":\[([^\]]*)\]/, out)
    assert Enum.map(String.split(ids, ","), &String.to_integer/1) == Enum.take(reference_ids("greedy_ids"), 2)
    {out, status} = System.cmd(@cli, args ++ ["--prefill-precision", "bf16"], stderr_to_stdout: true)
    assert status != 0
    assert out =~ ~s(expected "split" or "f16")
  end

  # Starts `nx-vulkan serve` on port 0 and returns {port, base_url} once it listens.
  defp start_server(extra \\ []) do
    port =
      Port.open({:spawn_executable, @cli}, [
        :binary,
        :exit_status,
        :stderr_to_stdout,
        args: ["serve", "--model", @gguf, "--port", "0", "--slots", "2", "--context", "256"] ++ extra
      ])

    {port, await_url(port, "")}
  end

  defp await_url(port, seen) do
    receive do
      {^port, {:data, data}} ->
        seen = seen <> data

        case Regex.run(~r{at (http://[^/\s]+)/v1/chat/completions}, seen) do
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
    await_exit(port)
  end

  defp await_exit(port) do
    receive do
      {^port, {:exit_status, status}} -> status
      {^port, {:data, _}} -> await_exit(port)
    after
      60_000 -> flunk("nx-vulkan serve did not stop on SIGTERM")
    end
  end

  defp http(:get, url), do: answer(:httpc.request(:get, {String.to_charlist(url), []}, [timeout: 300_000], body_format: :binary))

  defp http(:post, url, body),
    do: answer(:httpc.request(:post, {String.to_charlist(url), [], ~c"application/json", body}, [timeout: 300_000], body_format: :binary))

  defp answer({:ok, {{_, status, _}, _headers, body}}), do: {status, body}

  defp chat(url, extra) do
    http(:post, url <> "/v1/chat/completions", ~s({"messages": #{@messages}, "temperature": 0, "max_tokens": 16#{extra}}))
  end

  # JSON string contents (between the quotes) as text; enough for what this model says.
  defp unescape(s) do
    Regex.replace(~r/\\(u[0-9a-fA-F]{4}|.)/, s, fn
      _, "n" -> "\n"
      _, "t" -> "\t"
      _, "u" <> hex -> <<String.to_integer(hex, 16)::utf8>>
      _, c -> c
    end)
  end

  @string ~S{"((?:[^"\\]|\\.)*)"}

  # A stream's events, in order: the JSON of each `data:` line, and "[DONE]".
  defp events(body) do
    for event <- String.split(body, "\n\n", trim: true) do
      assert "data: " <> data = event
      data
    end
  end

  # The text a stream sent: its chunks' delta contents, joined.
  defp streamed_text(events) do
    Enum.map_join(events, fn e ->
      case Regex.run(~r/"delta":\{[^}]*"content":#{@string}/, e) do
        [_, text] -> unescape(text)
        nil -> ""
      end
    end)
  end

  defp assert_stream(body, device) do
    events = events(body)
    assert List.last(events) == "[DONE]"
    chunks = Enum.drop(events, -1)
    assert streamed_text(chunks) == @answer
    assert Enum.all?(chunks, &(&1 =~ ~s("device":"#{device}"))), body
    assert Enum.count(chunks, &(&1 =~ ~s("finish_reason":"stop"))) == 1
    chunks
  end

  defp metric(text, name) do
    [_, v] = Regex.run(~r/^#{Regex.escape(name)} (\d+)$/m, text)
    String.to_integer(v)
  end

  test "nx-vulkan serve: chat completions whole and streamed, models, bad requests, two streams at once" do
    {port, url} = start_server()

    try do
      {200, models} = http(:get, url <> "/v1/models")
      assert models =~ ~s("id":"#{Path.basename(@gguf, ".gguf")}")
      assert models =~ ~s("type":"generation")
      assert models =~ ~s("activations":"f32")
      [_, device] = Regex.run(~r/"device":#{@string}/, models)
      assert device != ""

      {200, whole} = chat(url, "")
      [_, content] = Regex.run(~r/"content":#{@string}/, whole)
      assert unescape(content) == @answer
      assert whole =~ ~s("finish_reason":"stop")
      assert whole =~ ~s("prompt_tokens":#{@prompt_tokens})
      assert whole =~ ~s("completion_tokens":#{@completion_tokens})
      assert whole =~ ~s("device":"#{device}")

      {200, streamed} = chat(url, ~s(, "stream": true))
      assert_stream(streamed, device)

      # bad requests are 400 with an error, and the server keeps serving
      {400, bad} = http(:post, url <> "/v1/chat/completions", ~s({"temperature": 0, "max_tokens": 4}))
      assert bad =~ "messages"
      {400, bad} = http(:post, url <> "/v1/chat/completions", ~s({"messages": #{@messages}, "temperature": -1}))
      assert bad =~ "temperature"
      {200, short} = http(:post, url <> "/v1/chat/completions", ~s({"messages": #{@messages}, "temperature": 0, "max_tokens": 1}))
      assert short =~ ~s("finish_reason":"length")
      assert short =~ ~s("completion_tokens":1)

      # two streams at once, one session each (--slots 2, so the runtime decodes them in the
      # same steps); both greedy, so both the reference answer; the second also asks for its
      # usage as a last chunk
      tasks =
        for extra <- [~s(, "stream": true), ~s(, "stream": true, "stream_options": {"include_usage": true})] do
          Task.async(fn -> chat(url, extra) end)
        end

      [{200, a}, {200, b}] = Task.await_many(tasks, 400_000)
      assert_stream(a, device)
      usage = List.last(assert_stream(b, device))
      assert usage =~ ~s("choices":[])
      assert usage =~ ~s("prompt_tokens":#{@prompt_tokens})
      assert usage =~ ~s("completion_tokens":#{@completion_tokens})

      # the server counted all of it: four answers stopped, one cut at its length
      {200, metrics} = http(:get, url <> "/metrics")
      assert metric(metrics, ~s(nx_vulkan_generations_total{finish_reason="stop"})) == 4
      assert metric(metrics, ~s(nx_vulkan_generations_total{finish_reason="length"})) == 1
      assert metric(metrics, "nx_vulkan_generated_tokens_total") == 4 * @completion_tokens + 1
      assert metric(metrics, ~s(nx_vulkan_requests_total{route="/v1/chat/completions",status="400"})) == 2
    after
      assert stop_server(port) == 0
    end
  end

  test "nx-vulkan serve --int8-activations: the model takes them, and the greedy answer holds" do
    # Every matrix of SmolLM2 (Q4_1 layers, tied Q8_0 output) has an int8 form; the server
    # reports what its matrices took. The int8 mode moves these logits by ≈2 (tests/llm.rs),
    # and this answer's greedy picks keep their tokens (the CLI gives the same 8 ids).
    {port, url} = start_server(["--int8-activations"])

    try do
      {200, models} = http(:get, url <> "/v1/models")
      assert models =~ ~s("activations":"int8")
      {200, whole} = chat(url, "")
      [_, content] = Regex.run(~r/"content":#{@string}/, whole)
      assert unescape(content) == @answer
      assert whole =~ ~s("completion_tokens":#{@completion_tokens})
      {200, metrics} = http(:get, url <> "/metrics")
      assert metrics =~ ~s(activations="int8")
    after
      assert stop_server(port) == 0
    end
  end
end
