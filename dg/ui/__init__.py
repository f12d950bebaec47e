"""The Gradio app: `app` builds the page, a module per tab (`generate_tab`, `race_tab`, `learn_tab` with its two
`learn_*` sections, the `edit_panel` under Generate), `common` and `modes` shared by them.

Three plain modules serve the app alone: `pace` (slow motion), `files` (what it hands out, Gradio's cache) and
`kept` (the runs a session keeps for replay). Runs themselves are the engine's (dg.engine).
"""
