"""Talking to RocketMQ: the gRPC proxy through rocketmq-python-client, and remoting admin requests."""
