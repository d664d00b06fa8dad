//! Rows as both engines read them, by column name, and the records they make; the Agent's and
//! OAuth's are in `agent::rows` and `oauth::rows`.

/// A row struct, declared once, that reads itself from the columns of its fields' names on either
/// engine: what `#[derive(sqlx::FromRow)]` writes, without compiling sqlx's macros and both
/// drivers for the host.
macro_rules! row {
    (
        $(#[$meta:meta])*
        pub struct $row:ident {
            $($(#[$field_meta:meta])* $vis:vis $field:ident: $ty:ty),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        pub struct $row {
            $($(#[$field_meta])* $vis $field: $ty,)+
        }

        impl<'r, R> sqlx::FromRow<'r, R> for $row
        where
            R: sqlx::Row,
            &'static str: sqlx::ColumnIndex<R>,
            $($ty: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,)+
        {
            fn from_row(row: &'r R) -> sqlx::Result<Self> {
                Ok(Self {
                    $($field: row.try_get(stringify!($field))?,)+
                })
            }
        }
    };
}

pub(super) use row;

row! {
    /// An installed application.
    pub struct Installation {
        pub application_id: i64,
        pub installed_at: i64,
    }
}

row! {
    /// A count of rows per name.
    pub struct Count {
        pub name: String,
        pub count: i64,
    }
}

row! {
    /// A committed Build's actions.
    pub struct CommitRow {
        pub seq: i64,
        pub actions: String,
    }
}
