"""compactlog's Kafka broker: the wire protocol (sans-IO) and, above it, the server.

``protocol`` turns bytes into request events and answers into the parts to write (Kafka's
SocketServer, RequestHeader, RequestChannel); ``versions`` holds the API table type and the
ApiVersions answer (ApiVersionsRequest, KafkaApis.handleApiVersionsRequest). Each API is declared
in its own module of ``apis/``; ``dispatch`` derives the dispatch
table and the advertised APIs from those declarations; ``transport`` runs it all on asyncio.
"""

from .protocol import (NEED_DATA, Close, Connection, EncodedResponse, FileRegion, NeedData, Request,
                       encode_response)
from .versions import ApiRange, SupportedApis

__all__ = ["NEED_DATA", "Close", "Connection", "EncodedResponse", "FileRegion", "NeedData", "Request",
           "encode_response", "ApiRange", "SupportedApis"]
