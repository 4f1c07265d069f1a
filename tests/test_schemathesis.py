"""Schemathesis against the OpenAPI schema of a real server: generated requests to every endpoint, no 500s.

Every generated request carries an admin key, so it reaches the handlers rather than the
authentication check, and the store holds a few memories, so some generated ids exist.
The responses must also match the schema: status codes, content types and bodies.
"""

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks

from api.docs import openapi_schema
from tests.subprocesses import serve

pytestmark = pytest.mark.slow

EXAMPLES_PER_OPERATION = 5


@pytest.fixture(scope="module")
def live_api(module_instance):
    token = module_instance.create_api_keys(fuzzer={"scopes": ["admin"]})["fuzzer"]
    module_instance.run("""
        for n in range(1, 6):
            services.memory_remember(namespace="default", content=f"Seed memory number {n}.", tags=["seed"], **ACTOR)
    """)
    # Throttling off: hundreds of requests a minute from one key are the point here.
    env = {**module_instance.env, "MEMORY_API_READS_PER_MINUTE": "0", "MEMORY_API_WRITES_PER_MINUTE": "0"}
    with serve(env) as base:
        yield base, token


# The schema the server serves, built in this process (pytest-django has set Django up by now): the
# operations must be known when tests are collected, before the server starts.
schema = schemathesis.openapi.from_dict(openapi_schema())


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture],
)
def test_generated_requests_get_no_server_error_and_match_the_schema(case, live_api):
    base, token = live_api
    case.call_and_validate(
        base_url=base,
        headers={"Authorization": f"Bearer {token}"},
        checks=[
            checks.not_a_server_error,
            checks.status_code_conformance,
            checks.content_type_conformance,
            checks.response_schema_conformance,
        ],
    )
