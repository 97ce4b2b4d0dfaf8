"""The twin: an embedded simulated GPU cluster that real tools (kubectl, the kubernetes client,
paramiko, locust) talk to over the network, with dilated time and named defects."""
