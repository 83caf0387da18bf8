"""Settings of the embedder: the provider and model, batches, the local runtime, the worker threads."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AliasChoices, BaseModel, Field


class EmbeddingSettings(BaseModel):
    """Provider, model, batch sizes, local runtime, workers, retries."""

    embedder: Literal["local", "openai", "hash"] = Field(default="local", description=(
        "Embedding provider: `local` (a sentence-transformers model in process), `openai` (an OpenAI-"
        "compatible API) or `hash` (deterministic test vectors)."))
    embed_model: str = Field(default="all-MiniLM-L6-v2", description=(
        "Model name for the embedder (for `local`, a name or path; for `openai`, the API's model id)."))
    # used by the hash embedder; real models report their own
    embed_dim: int = Field(default=384, description=(
        "Vector dimension of the `hash` embedder; real models report their own."))
    # Local models (`local:<name>`) a tenant's space may use besides VIBE_EMBED_MODEL: names or
    # paths the operator vouches for; anything else is refused by its text (shared/model_specs.py).
    local_models: list[str] = Field(default_factory=list, max_length=100, description=(
        "Local models (names or paths) a tenant's space may use besides VIBE_EMBED_MODEL; others are "
        "refused."))
    # Fields whose numbers get a payload index in the vector collections every tenant shares
    # (range filters on other fields stay exact, read from the payload; shared/adapters/facets.py),
    # and at most this many such indexes per collection.
    filterable_fields: list[str] = Field(default_factory=list, max_length=1000, description=(
        "Numeric fields that get a payload index in the vector collections all tenants share (range "
        "filters on other fields stay exact)."))
    max_payload_indexes: Annotated[int, Field(ge=0, le=1000)] = Field(default=32, description=(
        "At most this many payload indexes per shared vector collection."))
    # documents per pipeline batch (store writes, a provider call, a queue message)
    embed_batch_size: int = Field(default=32, description=(
        "Documents per embedding batch: one store write, one provider call, one queue message."))
    # Documents per forward pass of the local model (onnxruntime or torch), within a pipeline
    # batch. Small passes pad less and keep activations in cache: with one document thread,
    # onnxruntime embeds 49.6 docs/s in passes of 4 against 38.0 in passes of 32, torch 50.0
    # against 47.3 (`python -m bench throughput`).
    embed_model_batch_size: Annotated[int, Field(ge=1, le=256)] = Field(default=4, description=(
        "Documents per forward pass of the local model within a batch (small passes pad less)."))
    openai_base_url: str | None = Field(default=None, description=(
        "Base URL of the OpenAI-compatible embeddings API (unset = OpenAI's)."))
    openai_api_key: str | None = Field(default=None, description="API key for the `openai` embedder.")

    # Workers.
    workers: int = Field(default=2, description=(
        "Embedding worker threads in the embedded profile; default Celery concurrency for `vibe-semantic "
        "worker`."))
    job_max_attempts: int = Field(default=4, description=(
        "Attempts per embedding job before its documents are marked failed."))
    job_backoff_seconds: float = Field(default=0.5, description=(
        "First retry delay of a failed embedding job (doubled per attempt, with jitter)."))
    # Threads the local model may use; 0 = all cores but one, so background embedding leaves
    # a core to the read path (bench latency: first events wait behind a busy model otherwise).
    embed_threads: int = Field(default=0, description="Threads the local model may use; 0 = all cores but one.")
    # The local model's runtime (shared/adapters/embedders/onnx_embedder.py): auto = an ONNX
    # export (cached in <data_dir>/models, verified against torch) when it verifies, torch
    # otherwise (logged at start-up); onnx = fail at start-up without it. Documents follow
    # embed_doc_runtime (auto = onnxruntime: bench/throughput.py compares the two).
    embed_runtime: Literal["auto", "onnx", "torch"] = Field(default="auto", description=(
        "Local model runtime for queries: `auto` (onnxruntime when its graph verifies, else torch if the "
        "`export` extra is installed), `onnx` or `torch` (needs the `export` extra)."))
    embed_doc_runtime: Literal["auto", "onnx", "torch"] = Field(default="auto", description=(
        "Local model runtime for documents: `auto` (onnxruntime), `onnx` or `torch` (needs the `export` "
        "extra)."))
    # How many nice levels below the process the local model's document thread runs (Linux,
    # per thread), so queries get a core first; 0 = same priority.
    embed_doc_nice: Annotated[int, Field(ge=0, le=19)] = Field(default=5, description=(
        "Nice levels below the process at which the document-embedding thread runs (Linux), so queries "
        "get a core first."))
    # The serving process's garbage-collector thresholds (gc.set_threshold: allocations before a
    # young collection, young collections before a middle one, middle ones before a full one),
    # a JSON list. Each read allocates thousands of tracked objects (hits, keys, fused rows) and
    # CPython's (700, 10, 10) ran ~4 young collections a read and a full one (~30 ms) every ~30
    # reads; (5000, 20, 1000) spent a third of the collector time with no full collection in the
    # same 400 back-to-back reads at 100k documents.
    gc_thresholds: tuple[Annotated[int, Field(ge=1)], Annotated[int, Field(ge=1)], Annotated[int, Field(ge=1)]] = Field(
        default=(5000, 20, 1000), description=(
        "The serving process's garbage-collector thresholds, a JSON list of three integers."))
    # The ONNX query encoder's weights: int8 = the feed-forward MatMuls' weights as int8 blocks
    # (onnx_export.query_int8), used only when its vectors of the probes are within 0.999
    # cosine of torch's at load (fp32 otherwise, logged); documents always go through fp32.
    embed_query_weights: Literal["int8", "fp32"] = Field(default="int8", description=(
        "Weights of the ONNX query encoder: `int8` (checked against torch at load, else fp32) or `fp32`."))

    # inner_voice's clients configure the embedder with SURR_EMBED_*; VIBE_EMBEDDER,
    # VIBE_EMBED_MODEL and VIBE_EMBED_DIM win when both are set.
    surr_embed_provider: str | None = Field(default=None, validation_alias=AliasChoices(
        "SURR_EMBED_PROVIDER"), description=(
        "The embedding provider (`openai`, `local` or `hash`) when VIBE_EMBEDDER is not set."))
    surr_embed_model: str | None = Field(default=None, validation_alias=AliasChoices(
        "SURR_EMBED_MODEL"), description="The embedding model when VIBE_EMBED_MODEL is not set.")
    surr_embed_dim: Annotated[int, Field(ge=1, le=65_536)] | None = Field(
        default=None, validation_alias=AliasChoices("SURR_EMBED_DIM"), description=(
            "The model's vector dimension: the `hash` embedder's when VIBE_EMBED_DIM is not set; for a "
            "real model, a check: a model of another dimension stops the service at start-up."))

    # Longest input the openai embedder sends, in UTF-8 bytes (longer ones are cut at a character
    # boundary): a byte-level BPE token covers at least one byte, so 8,000 bytes stay under the
    # 8,191-token input limit of OpenAI's embedding models whatever the script.
    embed_max_input_bytes: Annotated[int, Field(ge=16)] = Field(default=8_000, description=(
        "Longest input the `openai` embedder sends, in UTF-8 bytes (longer input is cut at a character "
        "boundary)."))
