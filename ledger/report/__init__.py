"""Cost and usage reports over the index (`ledger report`).

Modules: `buckets` (time zones, day/week/month buckets), `costs` (cost basis rules),
`models` + `sync` (report_facts: the estimate cache and aggregation table), `aggregate`
(queries), `render` (table / JSON / CSV), `service` (index -> sync -> query).
"""
