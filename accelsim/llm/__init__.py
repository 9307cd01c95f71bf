"""Large language models at the token level: decoder configs (`models`), the work of a prefill
or decode step as rows the device cost models cost (`work`, `costs`), tensor, pipeline and
expert parallelism (`parallel`), memory and the paged KV cache (`memory`), whole steps on a
split (`steps`), one batch's TTFT / TPOT (`infer`), serving with continuous or static batching
under open- or closed-loop arrivals (`requests`, `arrivals`, `engine`, `serve`) and a training
step with ZeRO (`train`, its TP collectives as the events of `tp_events`, its data-parallel
exchange as the events of `dp_events`, their energy in `train_comm`, the record in
`train_record`).
`accelsim.llm.run.run_llm` is the entry point `accelsim.run.run_simulation` calls when a
run sets an LLM knob (prompt_tokens, output_tokens, tp, pp, zero, ...) or serves a decoder."""
