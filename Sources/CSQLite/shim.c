// The header holds everything; this file makes the target a compiled one.
