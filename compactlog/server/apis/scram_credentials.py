"""DescribeUserScramCredentials (API key 50, v0) and AlterUserScramCredentials (API key 51, v0):
Kafka's ``KafkaApis.handleDescribeUserScramCredentialsRequest`` (``ScramImage.describe``) and
``ControllerApis.handleAlterUserScramCredentials`` (``ScramControlManager.alterCredentials``),
over the data dir's credential file (``security/credentials.py``). The client salts the password;
the broker stores StoredKey and ServerKey computed from it, never the salted password itself, and
logs neither (the request body is redacted in the transport's error log). With an authorizer,
describing needs DESCRIBE on the cluster and altering ALTER (``CLUSTER_AUTHORIZATION_FAILED``: the
top-level error, or every user's).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..authorizer import auth_helper
from ..messages import NO_THROTTLE, build, nested, response_class, response_types
from ..security.credentials import Deletion, Upsertion
from ..state import BrokerState
from .handler import THREAD, ApiHandler


CLUSTER_DENIED = auth_helper.DENIED_MESSAGE[ErrorCode.cluster_authorization_failed]


def handle_describe_user_scram_credentials(state: BrokerState, request):
    if not auth_helper.authorize_cluster(state, request, auth_helper.DESCRIBE):
        return describe_error(request.body, response_class(request), ErrorCode.cluster_authorization_failed,
                              CLUSTER_DENIED)
    cls, module = response_types(request)
    users = request.body.users
    names = None if users is None else [u.name for u in users]
    results = tuple(
        module.DescribeUserScramCredentialsResult(
            user=r.user, error_code=ErrorCode[r.error], error_message=r.message,
            credential_infos=tuple(module.CredentialInfo(mechanism=m, iterations=i) for m, i in r.credentials))
        for r in state.security.credentials.describe(names))
    return cls(throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None, results=results)


def handle_alter_user_scram_credentials(state: BrokerState, request):
    body = request.body
    if not auth_helper.authorize_cluster(state, request, auth_helper.ALTER):
        return alter_error(body, response_class(request), ErrorCode.cluster_authorization_failed, CLUSTER_DENIED)
    cls, module = response_types(request)
    results = state.security.credentials.alter(
        [Deletion(d.name, int(d.mechanism)) for d in body.deletions],
        [Upsertion(u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password))
         for u in body.upsertions])
    for r in results:
        if r.error == "none":
            state.logger.info(f"SCRAM credentials of user {r.user!r} altered")
    return cls(throttle_time=NO_THROTTLE, results=tuple(
        module.AlterUserScramCredentialsResult(user=r.user, error_code=ErrorCode[r.error], error_message=r.message)
        for r in results))


def describe_error(body, cls, code, message):
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, error_message=message, results=())


def alter_error(body, cls, code, message):
    r_cls = nested(cls, "AlterUserScramCredentialsResult")
    users = dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions])
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(
        build(r_cls, user=u, error_code=code, error_message=message) for u in users))


DESCRIBE_USER_SCRAM_CREDENTIALS = ApiHandler(
    50, "DescribeUserScramCredentials", 0, 0, mode=THREAD,
    handler=handle_describe_user_scram_credentials, error_response=describe_error)
ALTER_USER_SCRAM_CREDENTIALS = ApiHandler(
    51, "AlterUserScramCredentials", 0, 0, mode=THREAD,
    handler=handle_alter_user_scram_credentials, error_response=alter_error)
