# The encoder from Elixir: warmed inputs/s of NxVulkan.Encoder.embed/3 per (batch, seq), the
# shapes of bench/encoder/torch_encoder.py (texts made of single-token words so each input is
# exactly `seq` tokens with [CLS]/[SEP]; distinct texts per row). One JSON line per measurement.
#
#   mix run bench/encoder_bench.exs MODEL_DIR [precisions] [shapes] [reps]
#   e.g. mix run bench/encoder_bench.exs ~/.cache/nx_vulkan/models/all-MiniLM-L6-v2 fp32,fp16 1x32,8x32 20

[dir | rest] = System.argv()
precisions = Enum.at(rest, 0, "fp32") |> String.split(",") |> Enum.map(&String.to_atom/1)

shapes =
  Enum.at(rest, 1, "1x32,2x32,4x32,8x32,64x128")
  |> String.split(",")
  |> Enum.map(fn s -> s |> String.split("x") |> Enum.map(&String.to_integer/1) |> List.to_tuple() end)

reps = String.to_integer(Enum.at(rest, 2, "30"))

# the word list of bench/encoder/torch_encoder.py (single WordPiece tokens, uncased BERT vocab)
words =
  ~w(the of and to in is was for on as with by he at from his an were are which this be
     or has had not first one their its new after who they have her she two been other when
     there all also into during time more school only city would may year world some most
     then where later used people made over team war state known game part two film him
     years many such these back best well three them out life album city music day band
     house small west north south east club long high work name make town left way down
     party four found great last while under home could both good water early old public
     side line own five big play area main like place did set took)
  |> List.to_tuple()

texts_of_len = fn n, seq, salt ->
  for r <- 0..(n - 1) do
    for k <- 0..(seq - 3), into: [] do
      elem(words, rem(r * 7 + salt * 13 + k * (rem(r, 5) + 1), tuple_size(words)))
    end
    |> Enum.join(" ")
  end
end

median = fn xs -> xs |> Enum.sort() |> Enum.at(div(length(xs), 2)) end

for precision <- precisions do
  {load_us, encoder} = :timer.tc(fn -> NxVulkan.Encoder.load!(dir, precision: precision) end)

  IO.puts(
    ~s({"peer":"nx_vulkan_elixir","bench":"load","precision":"#{precision}","device":"#{encoder.device}","load_ms":#{load_us / 1000}})
  )

  for {batch, seq} <- shapes do
    texts = texts_of_len.(batch, seq, batch)
    [{ids, _} | _] = NxVulkan.Encoder.tokenize(encoder, texts)
    if length(ids) != seq, do: raise("texts tokenize to #{length(ids)} tokens, not #{seq}")
    for _ <- 1..5, do: NxVulkan.Encoder.embed(encoder, texts, format: :binary)

    times =
      for _ <- 1..reps do
        {us, _} = :timer.tc(fn -> NxVulkan.Encoder.embed(encoder, texts, format: :binary) end)
        us
      end

    med = median.(times) / 1.0e6

    IO.puts(
      ~s({"peer":"nx_vulkan_elixir","bench":"encode","scope":"e2e","precision":"#{precision}","device":"#{encoder.device}",) <>
        ~s("batch":#{batch},"seq":#{seq},"inputs_per_s":#{batch / med},"median_ms":#{med * 1000},"reps":#{reps}})
    )
  end
end
