"""Run every entry of the unseen bank (tests/unseen_bank_7_13.py) through its self-check and write what each check said.

`python tests/unseen_bank_7_13_measure.py [OUT.json]`: one record per entry (its name, function, kind, the mistake in
the bank writer's words, and the check's verdict: 'passed', or the AssertionError's message, or another exception the
check let out). The verdicts are then judged by hand against the mistakes (see the bank's README)."""
import contextlib, io, json, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from transformer_tutorial import checks
from unseen_bank_7_13 import BANK


def verdict(entry):
    "('passed' | 'refused' | 'crashed', message) for one entry."
    namespace = {}
    exec(compile(entry['source'], f"<{entry['name']}>", 'exec'), namespace)
    check = getattr(checks, 'check_' + entry['function'])
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out): check(namespace[entry['function']])
    except AssertionError as e: return 'refused', str(e)
    except Exception as e: return 'crashed', f"{type(e).__name__}: {e}"
    return 'passed', out.getvalue().strip()


if __name__ == '__main__':
    records = []
    for entry in BANK:
        t = time.perf_counter()
        outcome, message = verdict(entry)
        records.append({k: entry[k] for k in ('name', 'function', 'kind', 'mistake')} | {'outcome': outcome, 'message': message,
                                                                                          'seconds': round(time.perf_counter() - t, 2)})
        print(f"{entry['kind']:7} {outcome:8} {entry['function']:24} {entry['name']}: {message[:160]}", flush=True)
    Path(sys.argv[1] if len(sys.argv) > 1 else 'unseen_bank_7_13_verdicts.json').write_text(json.dumps(records, indent=1, ensure_ascii=False))
