"""Re-export: document writes moved to services/core/documents.py (the API, the MCP tools and
the composition root all use them; they are core, not API). The API routes still import
their validators from here."""

from services.core.documents import WriteResult, check_collection, check_doc_id

__all__ = ["WriteResult", "check_collection", "check_doc_id"]
