import ShareEngine
import ShareProtocol

extension SendReport {
    /// A send to a LocalSend device, as the outbox records it.
    package init(localSend report: LocalSendSend.Report) {
        self.init()
        delivered = report.delivered.map { ($0, Ack(item: $0, outcome: "saved", savedAs: nil)) }
        refused = report.refused
        bytesSent = report.bytes
        wireBytes = report.bytes
        linkBytes = report.bytes
        seconds = report.seconds
        route = .code("LocalSend")
    }
}
