"""compactlog's Kafka broker: the wire protocol (sans-IO) and, above it, the server.

``protocol`` turns bytes into request events and responses into bytes (Kafka's SocketServer,
RequestHeader, RequestChannel); ``versions`` holds the advertised API table and the ApiVersions
answer (ApiVersionsRequest, KafkaApis.handleApiVersionsRequest).
"""

from .protocol import NEED_DATA, Close, Connection, NeedData, Request, encode_response
from .versions import BROKER, BROKER_APIS, GROUP_APIS, ApiRange, SupportedApis

__all__ = ["NEED_DATA", "Close", "Connection", "NeedData", "Request", "encode_response",
           "BROKER", "BROKER_APIS", "GROUP_APIS", "ApiRange", "SupportedApis"]
