"""Token arithmetic: how many tokens a request holds, estimated, calibrated and counted (public).

``tokens`` weighs a chat-completions body in characters and estimates its tokens; ``calibration`` keeps
each (endpoint, model)'s characters per token from what the endpoint reported; ``counting`` counts a
request before it is sent, with the model's own tokenizer where there is one. It sits below the turn
(which sizes a request before sending it) and above the wire (whose native APIs count for themselves).
"""
