"""The Gradio demo: live runs in background threads (runs, race), session state, one module per tab.

Only the tab modules, `common` and `app` import gradio; `runs`, `race` and `session` run without it.
"""
