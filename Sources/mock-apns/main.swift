print("mock")
