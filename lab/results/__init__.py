"""Run outputs under ``results/<run-id>/``, written the same way by every kind of run.

    run_folders  run folders (never overwritten)
    environment  the one ``environment()``: machine, load average, git, cluster, server, embedded node
    jsonio       atomic JSON writing and the one conversion of results to JSON
    run_files    the one way in for a run folder's files: checked types, paths kept inside the run
    units        the one formatting of numbers and units (fmt, si, ms, seconds, rate, count, percent)
    html         the result pages' helpers (esc, fmt, table, page, embedded figures)
    scratch      scratch keyspaces: created fresh for one run, dropped at its end
"""
