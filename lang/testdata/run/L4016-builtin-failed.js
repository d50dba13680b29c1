// fails: L4016
json.parse("{")
