"""What of a request may go into a log line (security.md pitfall 4): the bodies of SaslHandshake,
SaslAuthenticate and AlterUserScramCredentials never (a PLAIN password, a salted password), and a
config value of a secret setting (``ssl.keystore.password``, ``...sasl.jaas.config``) in
CreateTopics, AlterConfigs or IncrementalAlterConfigs is masked."""

from __future__ import annotations

import re

from ...storage.config_def import is_secret_setting  # noqa: F401 - the one rule, beside the config types


HIDDEN_BODIES = frozenset({17, 36, 51})
CONFIG_BODIES = frozenset({19, 33, 44})
# kio's repr of a config entry: name='...', [config_operation=..., ]value='...'
_CONFIG = re.compile(r"""(name=(['"])(?P<name>.*?)\2, (?:config_operation=[^,]+, )?value=)(?P<q>['"]).*?(?P=q)""")


def redacted_body(request) -> str:
    if request.api_key in HIDDEN_BODIES:
        return "[hidden]"
    text = repr(request.body)
    if request.api_key in CONFIG_BODIES:
        text = _CONFIG.sub(lambda m: m.group(1) + ("'[hidden]'" if is_secret_setting(m.group("name"))
                                                   else m.group(0)[len(m.group(1)):]), text)
    return text
