# The tensor-handle API without Nx: run with `mix run examples/handles.exs`.
# (With Nx available, see examples/quickstart.exs for NxVulkan.Backend.)
IO.puts(NxVulkan.info_report())

xs = for i <- 0..9, into: <<>>, do: <<i * 0.5::float-32-little>>
x = NxVulkan.upload(xs, {:f, 32}, {2, 5})
y = NxVulkan.unary(:exp, x, {:f, 32})
s = NxVulkan.reduce(:sum, y, [1], false, {:f, 32})
for <<v::float-32-little <- NxVulkan.download(s)>>, do: IO.puts("row sum of exp: #{v}")

t = NxVulkan.transpose(x, [1, 0])
d = NxVulkan.dot(x, [1], [], t, [0], [], {:f, 32})
IO.inspect(NxVulkan.describe(d), label: "x · xᵀ")
IO.inspect(NxVulkan.stats(), label: "engine counters")
