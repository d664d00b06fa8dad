//! The applications an account can install, each declaring the credentials it uses.

/// One credential an application declares.
#[derive(Debug)]
pub struct CredentialSpec {
    /// Name, matching `^[A-Za-z_][A-Za-z0-9_]{0,127}$`.
    pub name: &'static str,
    /// What it is for.
    pub description: &'static str,
    /// Whether install needs it.
    pub required: bool,
}

/// One installable application.
#[derive(Debug)]
pub struct AppSpec {
    /// Numeric id, from 1.
    pub id: i64,
    /// Short name.
    pub name: &'static str,
    /// What it does.
    pub description: &'static str,
    /// The credentials it declares.
    pub credentials: &'static [CredentialSpec],
}

impl AppSpec {
    /// The declared credential called `name`.
    pub fn credential(&self, name: &str) -> Option<&CredentialSpec> {
        self.credentials.iter().find(|c| c.name == name)
    }
}

/// The catalog of the reference server.
pub const APPS: &[AppSpec] = &[
    AppSpec {
        id: 1,
        name: "price-feeds",
        description: "Market prices for assets.",
        credentials: &[CredentialSpec {
            name: "API_KEY",
            description: "Key for the price API.",
            required: true,
        }],
    },
    AppSpec {
        id: 2,
        name: "block-explorer",
        description: "Transaction and address lookups on block explorers.",
        credentials: &[
            CredentialSpec {
                name: "API_KEY",
                description: "Key for the explorer API.",
                required: true,
            },
            CredentialSpec {
                name: "WEBHOOK_SECRET",
                description: "Secret that signs explorer callbacks.",
                required: false,
            },
        ],
    },
    AppSpec {
        id: 3,
        name: "notifications",
        description: "Messages about committed Builds.",
        credentials: &[],
    },
];

/// The application with `id`.
pub fn app(id: i64) -> Option<&'static AppSpec> {
    APPS.iter().find(|app| app.id == id)
}
