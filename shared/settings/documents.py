"""Settings of writes and collections: input limits, eligibility, languages, per-collection settings."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AliasChoices, BaseModel, Field

from shared.text.languages import LanguageMap


class DocumentSettings(BaseModel):
    """What a write may hold and how a collection is analysed and embedded."""

    # Input limits.
    max_doc_bytes: int = Field(default=1_048_576, description="Largest document accepted, in bytes.")
    passage_chars: int = Field(default=1000, ge=200, le=100_000, description=(
        "A document whose text is longer is embedded as passages of at most this many characters "
        "(split on headings, paragraphs, sentences); its semantic score is its best passage's. "
        "1000 fits all-MiniLM-L6-v2's 256 word pieces."))
    passage_overlap: int = Field(default=120, ge=0, le=10_000, description=(
        "Characters a passage cut inside a paragraph repeats from the one before it."))
    max_passages: int = Field(default=256, ge=1, le=4096, description=(
        "Most passages embedded per document (usage and budgets count each one); text past them is "
        "counted in vibe_passages_capped_total."))
    max_bulk_docs: int = Field(default=5_000, description="Most documents in one bulk request.")
    max_bulk_bytes: int = Field(default=64 * 1_048_576, description="Largest bulk request body, in bytes.")
    # A bulk is stored in transactions of at most this many documents, the store's writer lock
    # and the index follower released between them, so another tenant's single write waits for
    # one chunk, not a whole 5,000-document bulk. Each item still answers on its own.
    bulk_write_chunk: Annotated[int, Field(ge=1)] = Field(default=64, description=(
        "A bulk is stored in transactions of at most this many documents, so other tenants' writes wait "
        "for one chunk only."))

    graph_max_edges_per_node: Annotated[int, Field(ge=1, le=100_000)] = Field(default=1_000, description=(
        "Most edges (`semantic.edges`) one document may be an end of, per tenant; a write past it is refused "
        "with 400 `invalid_params` naming `from` or `to`."))

    # Eligibility and redaction: JSON in the environment.
    index_policy: list[dict[str, Any]] | dict[str, Any] = Field(default_factory=list, description=(
        "Eligibility policy deciding which documents are embedded, and where: the object `{\"default\": "
        "{\"action\": \"sample\", \"p\": 0.1}, \"rules\": [{\"if\": {...}, \"then\": {\"action\": "
        "\"embed|ignore|defer|sample\", \"p\"?, \"space\"?, \"fields\"?}}]}` or just the list of rules. "
        "Conditions: `collection`, `mime`, `type`, `app` (regexes), `tokenCount`, `sensitivity`, `certs`. "
        "Rules win over a writer's deny, which wins over the heuristics; `default` applies last."))
    # Which certificates each external provider may receive documents under. Documents with
    # no certificates are unaffected; local models receive everything (the text stays here).
    provider_certs: dict[str, list[str]] = Field(default_factory=dict, validation_alias=AliasChoices(
        "VIBE_PROVIDER_CERTS"), description=(
        "Certificates under which documents may be sent to an external embedding provider, JSON "
        "`{\"openai\": [\"acme:public\", \"docs:*\"]}` (`issuer:*`: every certificate of that issuer). A "
        "document carrying any other certificate is never sent to that provider: a policy rule "
        "`{\"if\": {\"certs\": ...}, \"then\": {\"space\": ...}}` may route it to a space with a local model, "
        "else it stays `deferred` with reason `cert`. Empty = certificate-bearing documents stay local."))
    embed_fields: dict[str, list[str]] = Field(default_factory=dict, description=(
        "Fields embedded per collection, JSON `{\"<collection>\": [\"title\", \"body\"]}`; collection settings "
        "win over it."))

    # Lexical analysis language per collection (shared/text/languages.py; ISO code or English
    # name: "fr" or "french", or "simple": no stop words, no stemming), JSON in the environment:
    # '{"docs_fr": "fr"}'. Every other collection is analysed in `default_language`. Changing
    # either rebuilds the lexical index from the store of record at the next start (with
    # progress): set a collection's language before writing to it.
    default_language: str = Field(default="en", description=(
        "Keyword-analysis language of every collection not named in VIBE_COLLECTION_LANGUAGES (ISO code, "
        "English name or `simple`)."))
    collection_languages: dict[str, str] = Field(default_factory=dict, max_length=10_000, description=(
        "Keyword-analysis language per collection, JSON `{\"<collection>\": \"fr\"}`; a change rebuilds the "
        "keyword index at the next start."))

    # Per-collection settings stored through `PUT /v1/collections/{c}/settings` win over the two
    # above and over `embed_fields`; each process re-reads a tenant's rows after this many seconds
    # (shared/collection_settings.py): the bound on how long another replica's change takes.
    collection_settings_ttl_seconds: Annotated[float, Field(ge=0, le=60)] = Field(default=1.0, description=(
        "How often a process re-reads stored collection settings (the bound on how long another replica's"
        " change takes)."))
    # Documents a collection delete removes per transaction (`DELETE /v1/collections/{c}`), and
    # per `docs:deleteByFilter` call (the caller repeats the call while `more` is true).
    collection_delete_page: Annotated[int, Field(ge=1, le=10_000)] = Field(default=500, description=(
        "Documents a collection delete removes per transaction."))
    delete_by_filter_max: Annotated[int, Field(ge=1, le=10_000)] = Field(default=1_000, description=(
        "Most documents one `docs:deleteByFilter` call deletes (repeat while `more` is true)."))

    # ACL bounds (services/api/writes.py DocumentService._acl): each principal is one keyword term
    # in OpenSearch, whose `acl` field ignores terms over 1024 characters (fail closed: a dropped
    # term matches nobody), so a principal stays below that; the total bounds a point's payload.
    acl_max_principal_bytes: Annotated[int, Field(ge=1, le=1024)] = Field(default=512, description=(
        "Longest ACL principal, in bytes."))
    acl_max_bytes: Annotated[int, Field(ge=1)] = Field(default=65_536, description=(
        "Largest `_acl` of one document, in bytes."))

    def language_map(self) -> LanguageMap:
        return LanguageMap.parse(self.default_language, self.collection_languages)
