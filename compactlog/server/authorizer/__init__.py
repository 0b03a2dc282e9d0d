"""Authorization as Kafka's StandardAuthorizer (security.md §6-§8).

``acl`` is the data model with the codes as on the wire and the filters; ``standard`` the
authorizer (``StandardAuthorizer``, ``StandardAuthorizerData``) over an indexed, immutable ACL
set; ``store`` the data dir's ACL file; ``auth_helper`` the questions API handlers ask
(``AuthHelper``). The ACL admin APIs are declared in ``server/apis/acls.py``, the
``compactlog acls`` command in ``cli/acls.py``.
"""

# this package's settings, registered with every owner's (storage/config_registry.py)
from . import config as _config  # noqa: F401
