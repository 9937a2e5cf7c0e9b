// A helper process for ZeroMQTests: the tests spawn it, talk to it over real sockets and kill it.
//
//   zeromq-test-peer queue-then-close ENDPOINT COUNT LINGER_MS
//       PUSH-connects to ENDPOINT (usually not bound yet), queues COUNT messages "message-<i>", prints "queued",
//       then closes with the given linger and terminates the context, which waits until they are delivered.
//   zeromq-test-peer connect-and-hang ENDPOINT
//       DEALER-connects to ENDPOINT, sends "hello", prints "connected" and waits to be killed.
//   zeromq-test-peer big-ack-ground SERVER_PUBLIC_Z85 SERVER_SECRET_Z85 BYTES
//       A hostile ground for the agent's tests, in a process of its own so that its big frame is not in the tests'
//       memory: binds a PULL and a ROUTER on tcp://127.0.0.1:* as CURVE servers (no ZAP: any client key), prints
//       "listening DATA ACKS", and once a batch has come and a message named a route, sends that route one frame of
//       BYTES bytes and prints "sent"; then reads on, answering nothing, until killed.
import Foundation
import ZeroMQ

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("zeromq-test-peer: \(message)\n".utf8))
    exit(64)
}

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let arguments = CommandLine.arguments.dropFirst()
guard let mode = arguments.first else { fail("usage: zeromq-test-peer MODE ARGS…") }

do {
    switch mode {
    case "queue-then-close":
        let parameters = Array(arguments.dropFirst())
        guard parameters.count == 3, let count = Int(parameters[1]), let lingerMilliseconds = Int(parameters[2]) else {
            fail("usage: queue-then-close ENDPOINT COUNT LINGER_MS")
        }
        let context = try ZeroMQContext()
        let push = try context.socket(.push)
        try push.connect(parameters[0])
        for index in 0..<count {
            try push.send(Data("message-\(index)".utf8))
        }
        say("queued")
        try push.close(linger: .milliseconds(lingerMilliseconds))
        context.terminate()
        say("done")
    case "connect-and-hang":
        let parameters = Array(arguments.dropFirst())
        guard parameters.count == 1 else { fail("usage: connect-and-hang ENDPOINT") }
        let context = try ZeroMQContext()
        let dealer = try context.socket(.dealer)
        try dealer.connect(parameters[0])
        try dealer.send(Data("hello".utf8))
        say("connected")
        while true { sleep(60) }
    case "big-ack-ground":
        let parameters = Array(arguments.dropFirst())
        guard parameters.count == 3, let bytes = Int(parameters[2]) else {
            fail("usage: big-ack-ground SERVER_PUBLIC_Z85 SERVER_SECRET_Z85 BYTES")
        }
        let keys = try CurveKeyPair(publicKeyZ85: parameters[0], secretKeyZ85: parameters[1])
        let context = try ZeroMQContext()
        let pull = try context.socket(.pull)
        let router = try context.socket(.router)
        for socket in [pull, router] {
            try socket.set(.linger, .zero)
            try socket.makeCurveServer(keys: keys)
            try socket.bind("tcp://127.0.0.1:*")
        }
        try router.set(.routerMandatory, true)
        try router.set(.routerHandover, true)
        say("listening \(try pull.lastEndpoint) \(try router.lastEndpoint)")
        var route: Data?
        var batches = 0
        var sent = false
        while true {
            let ready = try poll([PollItem(pull, .readable), PollItem(router, .readable)], timeout: .milliseconds(50))
            if !ready[1].isEmpty {
                while let message = try router.receiveMultipart(options: .dontWait) { route = message.first }
            }
            if !ready[0].isEmpty {
                while try pull.receiveMultipart(options: .dontWait) != nil { batches += 1 }
            }
            // A route not connected (yet, or any more) fails at once (ROUTER_MANDATORY): tried again next turn.
            if !sent, batches > 0, let route,
                (try? router.send([route, Data(count: bytes)], options: .dontWait)) != nil
            {
                sent = true
                say("sent")
            }
        }
    default:
        fail("unknown mode \(mode)")
    }
} catch {
    fail("\(error)")
}
