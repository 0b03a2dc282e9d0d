"""The authorizer's settings (Kafka's ServerConfigs.AUTHORIZER_CLASS_NAME and StandardAuthorizer's
``super.users``, ``allow.everyone.if.no.acl.found``): off unless ``authorizer.class.name`` is set.
Registered with every owner's (storage/config_registry.py).
"""

from __future__ import annotations

from ...storage.config_def import ConfigDef
from ...storage.config_registry import register

AUTHORIZER_SETTINGS = (
    ConfigDef("authorizer.class.name", "string", "", importance="low",
              doc="org.apache.kafka.metadata.authorizer.StandardAuthorizer turns ACLs on; empty (the default) "
                  "allows every request."),
    ConfigDef("super.users", "string", "", importance="medium",
              doc="Principals allowed everything whatever the ACLs say, separated by ';' (User:admin)."),
    ConfigDef("allow.everyone.if.no.acl.found", "bool", False, importance="low",
              doc="Whether a resource no ACL matches is open to everyone (else only super users may use it)."),
)

register("authorizer", __name__, AUTHORIZER_SETTINGS)
