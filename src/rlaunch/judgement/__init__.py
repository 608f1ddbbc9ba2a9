"""The judgement of a launch: the planned launch (`planned`), smoke parity (`parity`), and the one
function every caller applies the gates with (`judge`)."""
