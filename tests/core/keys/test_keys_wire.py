"""What only a real boot shows of "keys never in the box": the engine puts the key in on
the wire to the credential's host (and only there), and --block-private refuses the
cloud-metadata address. Through hbtui's engine client and preset binding, with a small
image; needs a host that boots guests and reaches the internet."""

from __future__ import annotations

import json
import uuid

import pytest

from hbtui.core.doctor.checks import boot_problems
from hbtui.core.keys.credentials import Preset
from hbtui.engine import Engine, MachineSpec

pytestmark = [pytest.mark.needs_boot, pytest.mark.real_engine]

PROBE = Preset("probe", "PROBE_KEY", ("httpbin.org",), header="x-api-key")
CURL = "apk add -q curl >/dev/null 2>&1; "


@pytest.mark.timeout(900)
async def test_the_engine_substitutes_the_key_only_for_its_host(real_smolvm, tmp_path):
    problems = boot_problems()
    if problems:
        pytest.skip("guests cannot boot here: " + problems[0][0])
    secret = f"hbtui-probe-{uuid.uuid4().hex}"
    engine = Engine(real_smolvm, state_dir=str(tmp_path / "state"), timeout=600)
    name = "keys-probe"
    await engine.create(
        MachineSpec(
            name=name,
            image="alpine:3.20",
            cpus=1,
            memory_mib=512,
            credentials=(PROBE.engine_spec(),),
            block_private=True,
            workload=("sleep", "infinity"),
        )
    )
    try:
        await engine.start(name, secrets={PROBE.env_var: secret})
        seen = await engine.exec(name, ["sh", "-c", "echo $PROBE_KEY"], timeout=60)
        placeholder = seen.stdout.decode().strip()
        assert placeholder.startswith("SMOL_PLACEHOLDER_PROBE_") and secret not in placeholder

        echoed = await engine.exec(
            name, ["sh", "-c", CURL + "curl -s https://httpbin.org/headers"], timeout=300
        )
        headers = {k.lower(): v for k, v in json.loads(echoed.stdout)["headers"].items()}
        assert headers.get("x-api-key") == secret  # put in by the host, on the way out

        elsewhere = await engine.exec(
            name,
            [
                "sh",
                "-c",
                CURL + 'curl -s https://postman-echo.com/headers -H "x-api-key: $PROBE_KEY"',
            ],
            timeout=300,
        )
        assert secret not in elsewhere.stdout.decode()  # another host gets the placeholder

        metadata = await engine.exec(
            name, ["sh", "-c", "curl -s -m 5 http://169.254.169.254/ || echo refused"], timeout=60
        )
        assert "refused" in metadata.stdout.decode()
        assert await engine.egress_events(name)  # the refusal is recorded
    finally:
        await engine.delete(name)
