"""Pure views of a trace: HTML (render, walkthrough), plotly figures (plots), files (export), one theme.

Traces in, HTML / figures / files out; nothing here imports gradio or runs a model.
"""
