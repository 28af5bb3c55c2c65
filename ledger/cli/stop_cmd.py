"""`ledger stop RUN`: ask a running run to stop (ledger.launch.stop)."""

from __future__ import annotations

from typing import Annotated

from ledger.cli.common import HomeOpt, JsonOpt, err, handle_errors, print_json
from ledger.cli.params import Argument, Option


@handle_errors
def stop(
    run: Annotated[str, Argument(help="Run id or unique prefix (with or without run_).")],
    home: HomeOpt = None,
    json_: JsonOpt = False,
    wait: Annotated[float, Option("--wait", help="Seconds to wait for the run to settle.", min=0)] = 10.0,
    no_signal: Annotated[bool, Option("--no-signal", help="Only leave the stop request file (no SIGTERM).",
                                      metavar="")] = False,
) -> None:
    """Stop a running run: it settles interrupted, with who stopped it.

    ledger writes a stop request into the run's directory, which its launcher reads within
    a tick (also from another container sharing the home), and SIGTERMs the launcher when
    it runs on this host (the process the manifest names: host, boot id, pid and start
    time). A settled run is left as it is. Exit 1 when the run did not settle in time.
    """
    from ledger.home import resolve_home
    from ledger.launch.stop import request_stop

    result = request_stop(resolve_home(home), run, wait_secs=wait, send_signal=not no_signal)
    if json_:
        print_json(result.to_json())
    else:
        from ledger.text import plain

        print(plain(result.message))
