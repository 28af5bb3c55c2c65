"""Cost and usage reports over the index (`ledger report`).

Modules: `buckets` (time zones, day/week/month buckets), `costs` (cost basis rules),
`models` + `schema` (the report's tables), `facts` (a run's fact rows, the estimate cache),
`sync` (keeping them in step with the index, plain SQL on dbapi.Conn; `rollups` the slots',
days' and groups' statements), `fullsync` / `quicksync` (a full rebuild / a few changed runs
through the SQLite driver), `synced` (nothing to sync?),
`aggregate` (queries: `query` what is asked, `factsql` its SQL, `collect` / `groups` / `top`
the groups read, `accumulate` / `medians` / `runcount` / `finish` their figures and rows),
`tasks`, `render` (table / JSON / CSV), `service` (index -> sync -> query).
"""
