"""``kvplan serve``: a local planning page on 127.0.0.1 (Starlette + uvicorn, in the default install).

The page posts a launch command, the hardware and slider settings; the server re-plans with the same engine model
as ``kvplan check`` and answers with the same JSON (``POST /api/plan``) or that JSON plus the report's charts
(``POST /api/view``). No model code, no network, no shell; bounded bodies; no file is read on the page's behalf
except the catalog's models (as ``check`` resolves them) and a config.json the user pastes.
"""
