"""cairn_client: the Python client of Cairn, the memory service and conversation runtime for
AI agents. `Client` blocks; `AsyncClient` is its asyncio twin with the same surface.

    from cairn_client import Client

    with Client() as cairn:  # CAIRN_URL / CAIRN_API_KEY, else http://127.0.0.1:8787
        cairn.memories.create(content="Use pnpm, not npm.", scope="repo", repo="shop")
        pack = cairn.context(task="add a dependency", repo="shop")
        print(pack.context, pack.memories_used, pack.token_count)
"""

from . import models
from ._async_client import AsyncClient
from ._client import Client
from ._errors import CairnError, ConnectionError, ServiceApiError

# Shown as `cairn_client.ServiceApiError` in tracebacks, where users import them from.
for _error in (CairnError, ConnectionError, ServiceApiError):
    _error.__module__ = __name__

__all__ = ["AsyncClient", "CairnError", "Client", "ConnectionError", "ServiceApiError", "models"]
__version__ = "0.1.0"
