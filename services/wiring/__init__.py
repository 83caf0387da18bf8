"""The composition root: reads `Settings`, builds every adapter and the core services, and
wires every front door (HTTP, MCP, CLI, workers). It lives in `services/` because it imports
the services; `shared/` never imports `services/`.

Adapters are imported here and nowhere in the core. Each port has one builder that picks its
adapter from `Settings`; distributed adapters are imported lazily so the embedded profile never
loads their clients. One module per kind of part:

- `stores`: the store of record and what lives in it (keys, ledger, explain records,
  collection settings), the cold store, the job queue and the budget;
- `indexes`: the lexical and vector indexes, the process's index slot, the change-log followers;
- `embedders`: each space's embedder and the embedding job handler;
- `lifecycle`: the scheduler's decisions and backfills;
- `agents`: the MCP agent tools' adapters;
- `root`: `build`, one process's parts wired into a `Container`, with the reads' touch policy;
- `front_doors`: the served app, the Celery worker and beat, MCP over stdio.

Every public builder is importable from `services.wiring` itself.
"""

from __future__ import annotations

from services.container import Container  # noqa: F401  # the type every front door receives
from services.wiring.agents import (  # noqa: F401
    allow_all,
    build_agent_adapters,
    build_citations,
    build_reranker,
    load_precall,
)
from services.wiring.embedders import (  # noqa: F401
    SpaceEmbedders,
    build_handler,
    check_declared_dim,
    passage_config,
)
from services.wiring.front_doors import (  # noqa: F401
    build_worker_runtime,
    create_app,
    run_mcp_stdio,
    run_scheduler,
    run_worker,
)
from services.wiring.indexes import (  # noqa: F401
    MAX_INDEX_SLOTS,
    _build_followers,
    _build_lexical,
    _build_vectors,
    build_shared_follower,
    claim_index_home,
    declared_filterable,
    follower_name,
    release_index_home,
)
from services.wiring.lifecycle import (  # noqa: F401
    backfill_reserve,
    build_lifecycle,
    lifecycle_config,
)
from services.wiring.root import (  # noqa: F401
    build,
    build_follow_ups,
    touch_policy,
)
from services.wiring.stores import (  # noqa: F401
    adopt_legacy_cold_dirs,
    build_budget,
    build_cold,
    build_collections,
    build_explains,
    build_key_store,
    build_ledger,
    build_store,
    cold_root,
)
