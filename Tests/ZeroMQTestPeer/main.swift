// A helper process for ZeroMQTests: the tests spawn it, talk to it over real sockets and kill it.
//
//   zeromq-test-peer queue-then-close ENDPOINT COUNT LINGER_MS
//       PUSH-connects to ENDPOINT (usually not bound yet), queues COUNT messages "message-<i>", prints "queued",
//       then closes with the given linger and terminates the context, which waits until they are delivered.
//   zeromq-test-peer connect-and-hang ENDPOINT
//       DEALER-connects to ENDPOINT, sends "hello", prints "connected" and waits to be killed.
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
    default:
        fail("unknown mode \(mode)")
    }
} catch {
    fail("\(error)")
}
